"""Cinder in one process: scheduler, volume service (one backend per
enabled_backends entry) and the volume API, as cinder/cmd/{scheduler,volume,
api}.py start them, sharing oslo.messaging's in-memory transport (fake:/).

Usage: cinder_all.py --config-file cinder.conf
"""
import eventlet

eventlet.monkey_patch()

import sys  # noqa: E402

from cinder import objects  # noqa: E402

objects.register_all()

from cinder.common import config  # noqa: E402
from cinder.common import constants  # noqa: E402
from cinder import rpc  # noqa: E402
from cinder import service  # noqa: E402
from cinder import version  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from oslo_service import service as os_service  # noqa: E402

CONF = cfg.CONF

# cinder.service.Service keeps service_id on the class (one service per
# process), so with the scheduler and the volume service in one process every
# heartbeat would update the row of the last one created and the other would
# look down. Point it at the reporting service's own row for each report.
_report_state = service.Service.report_state


def report_own_state(self):
    service.Service.service_id = self.origin_service_id
    return _report_state(self)


service.Service.report_state = report_own_state


def main():
    CONF(sys.argv[1:], project='cinder', version=version.version_string())
    config.set_middleware_defaults()
    logging.setup(CONF, 'cinder')
    rpc.init(CONF)
    launcher = os_service.ServiceLauncher(CONF, restart_method='mutate')
    launcher.launch_service(service.Service.create(binary='cinder-scheduler'))
    for backend in filter(None, CONF.enabled_backends):
        launcher.launch_service(service.Service.create(
            host='%s@%s' % (CONF.host, backend), service_name=backend,
            binary=constants.VOLUME_BINARY, coordination=True))
    launcher.launch_service(service.WSGIService('osapi_volume'))
    launcher.wait()


if __name__ == '__main__':
    main()
