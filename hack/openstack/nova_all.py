"""Nova in one process: conductor, scheduler, compute (fake driver) and the
compute API, as nova/cmd/{conductor,scheduler,compute,api_os_compute}.py start
them, but sharing oslo.messaging's in-memory transport (fake:/), whose
exchanges live in the process.

Unlike nova/cmd/compute.py it does not route compute's database access
through the conductor (no indirection_api), as Nova's functional tests do.

Usage: nova_all.py --config-file nova.conf
"""
import nova.monkey_patch  # noqa: F401  (eventlet, before anything else)

import sys

import nova.conf
from nova import config
from nova import objects
from nova import service
from oslo_log import log as logging
from oslo_service import service as os_service

CONF = nova.conf.CONF


def main():
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
