"""Waits until an OpenStack test world can boot servers and attach volumes,
then creates its flavor.

Ready means: Nova lists one hypervisor "up" (compute reports), the compute
host is mapped to cell1 (the scheduler's periodic host discovery; without it
a boot fails with "Host is not mapped to any cell"), and Cinder lists its
scheduler and volume services "up". Fails early, naming the log, when one of
the world's processes has exited.

Usage: ready.py DIR PORT_BASE TIMEOUT_SECONDS
"""
import json
import os
import sqlite3
import sys
import time
import urllib.error
import urllib.request

TOKEN = 'admin:admin'
FLAVOR = {'flavor': {'name': 'm1.tiny', 'id': '1', 'ram': 512, 'vcpus': 1, 'disk': 1}}


def call(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        'X-Auth-Token': TOKEN, 'Content-Type': 'application/json', 'Accept': 'application/json'})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b'{}')
    except urllib.error.HTTPError as e:
        return e.code, {}
    except (urllib.error.URLError, OSError, ValueError):
        return 0, {}


def dead_process(d):
    for name in ('stubs', 'placement', 'cinder', 'nova'):
        try:
            with open(os.path.join(d, name + '.pid')) as f:
                pid = int(f.read())
        except OSError:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return name
    return None


def host_mapped(d):
    try:
        db = sqlite3.connect('file:%s?mode=ro' % os.path.join(d, 'nova/nova_api.sqlite'), uri=True)
        try:
            return db.execute('select count(*) from host_mappings').fetchone()[0] > 0
        finally:
            db.close()
    except sqlite3.Error:
        return False


def main(argv):
    d, base, timeout = argv[1], int(argv[2]), float(argv[3])
    nova = 'http://127.0.0.1:%d/v2.1' % base
    cinder = 'http://127.0.0.1:%d/v3/admin' % (base + 1)
    deadline = time.time() + timeout
    state = {}
    while True:
        _, hv = call('GET', nova + '/os-hypervisors')
        state['nova hypervisor up'] = any(h.get('state') == 'up' for h in hv.get('hypervisors', []))
        state['compute host mapped to cell1'] = host_mapped(d)
        _, sv = call('GET', cinder + '/os-services')
        up = {s.get('binary') for s in sv.get('services', []) if s.get('state') == 'up'}
        state['cinder-scheduler up'] = 'cinder-scheduler' in up
        state['cinder-volume up'] = 'cinder-volume' in up
        if all(state.values()):
            break
        dead = dead_process(d)
        if dead:
            sys.stderr.write('ready: the %s process exited; see %s\n' % (dead, os.path.join(d, 'logs', dead + '.log')))
            return 1
        if time.time() > deadline:
            missing = ', '.join(k for k, v in state.items() if not v)
            sys.stderr.write('ready: not ready after %ds: no %s; see the logs in %s\n' % (timeout, missing, os.path.join(d, 'logs')))
            return 1
        time.sleep(0.5)
    code, _ = call('POST', nova + '/flavors', FLAVOR)
    if code not in (200, 409):
        sys.stderr.write('ready: creating flavor m1.tiny answered HTTP %d; see %s\n' % (code, os.path.join(d, 'logs', 'nova.log')))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
