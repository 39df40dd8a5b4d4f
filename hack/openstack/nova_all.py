"""Nova in one process: conductor, scheduler, compute (fake driver) and the
compute API, as nova/cmd/{conductor,scheduler,compute,api_os_compute}.py start
them, but sharing oslo.messaging's in-memory transport (fake:/), whose
exchanges live in the process.

Unlike nova/cmd/compute.py it does not route compute's database access
through the conductor (no indirection_api), as Nova's functional tests do.

With [tether] fake_nodes = N in the configuration file (hack/openstack.sh
up --scale), the fake driver reports N nodes instead of one: the host's name,
then the host's name with -1 ... -(N-1).

Usage: nova_all.py --config-file nova.conf
"""
import nova.monkey_patch  # noqa: F401  (eventlet, before anything else)

import configparser
import sys

import nova.conf
from nova import config
from nova import objects
from nova import service
from oslo_log import log as logging
from oslo_service import service as os_service

CONF = nova.conf.CONF


def fake_nodes(argv):
    """[tether] fake_nodes of the --config-file files (1 when not set)."""
    files = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == '--config-file']
    files += [a.split('=', 1)[1] for a in argv if a.startswith('--config-file=')]
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    cp.read(files)
    return cp.getint('tether', 'fake_nodes', fallback=1)


def spread_fake_nodes(n):
    """Make the fake driver report n nodes on its host."""
    from nova.virt import fake
    init_host = fake.FakeDriver.init_host

    def init_host_with_nodes(self, host):
        init_host(self, host)
        first = self._nodes[0]
        self._nodes = [first] + ['%s-%d' % (first, i) for i in range(1, n)]
    fake.FakeDriver.init_host = init_host_with_nodes


def main():
    n = fake_nodes(sys.argv)
    if n > 1:
        spread_fake_nodes(n)
    config.parse_args(sys.argv)
    logging.setup(CONF, 'nova')
    objects.register_all()
    import os_vif
    os_vif.initialize()
    launcher = os_service.ServiceLauncher(CONF, restart_method='mutate')
    for binary, topic in (('nova-conductor', 'conductor'),
                          ('nova-scheduler', 'scheduler'),
                          ('nova-compute', 'compute')):
        launcher.launch_service(service.Service.create(binary=binary, topic=topic))
    launcher.launch_service(service.WSGIService('osapi_compute', use_ssl=False))
    launcher.wait()


if __name__ == '__main__':
    main()
