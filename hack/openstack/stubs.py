"""Stand-ins for Keystone, Glance and Neutron in the OpenStack test world.

tether never calls Glance or Neutron; Nova does, to boot a server from an
image with no network. Keystone is used by clients (clouds.yaml) and by
Cinder, which looks Nova up in the catalog before it lets a caller other
than Nova delete an attachment. Each stub answers only what those callers ask:

  Keystone v3  POST /v3/auth/tokens (password or token) returns the token
               "user:project" (the form Nova's and Cinder's noauth
               middleware read) and a catalog of the world's endpoints;
               GET / and /v3 for version discovery. Passwords are not checked.
  Glance v2    one public image, its schema, the image list.
  Neutron v2   every list is empty (servers boot with networks "none").

Usage: stubs.py PORT_BASE   (ports as in render.py: keystone +3, glance +4,
                             neutron +5; nova +0, cinder +1, placement +2)
"""
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IMAGE_ID = '155d900f-4e14-4e4c-a73d-069cbf4541e6'
IMAGE = {
    'id': IMAGE_ID, 'name': 'tether-test-image', 'status': 'active',
    'visibility': 'public', 'disk_format': 'raw', 'container_format': 'bare',
    'size': 1024, 'virtual_size': None, 'min_disk': 0, 'min_ram': 0,
    'protected': False, 'os_hidden': False, 'tags': [], 'owner': 'admin',
    'checksum': None, 'os_hash_algo': None, 'os_hash_value': None,
    'created_at': '2026-01-01T00:00:00Z', 'updated_at': '2026-01-01T00:00:00Z',
    'file': '/v2/images/%s/file' % IMAGE_ID, 'self': '/v2/images/%s' % IMAGE_ID,
    'schema': '/v2/schemas/image',
}
# Nova builds its image dict from the schema's properties: every field above
# must be listed, or Nova drops it (and fails without the id).
IMAGE_SCHEMA = {
    'name': 'image',
    'properties': {k: {} for k in list(IMAGE) + ['locations', 'direct_url']},
    'additionalProperties': {'type': 'string'},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def reply(self, code, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header('Content-Type', 'application/json')
        for k, v in headers:
            self.send_header(k, v)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get('Content-Length') or 0)
        return json.loads(self.rfile.read(n) or b'{}') if n else {}

    def path_only(self):
        return self.path.split('?')[0].rstrip('/')

    def not_found(self):
        self.body()
        self.reply(404, {'message': 'the test world has no %s %s' % (self.command, self.path)})

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = not_found


class Glance(Handler):
    def do_GET(self):
        p = self.path_only()
        if p == '/v2/schemas/image':
            return self.reply(200, IMAGE_SCHEMA)
        if p == '/v2/images':
            return self.reply(200, {'images': [IMAGE]})
        if p == '/v2/images/' + IMAGE_ID:
            return self.reply(200, IMAGE)
        return self.not_found()


class Neutron(Handler):
    def do_GET(self):
        m = re.match(r'^/v2\.0/([a-z\-]+)$', self.path_only())
        if m:
            return self.reply(200, {m.group(1).replace('-', '_'): []})
        return self.not_found()


class Keystone(Handler):
    base = 0

    def version(self):
        return {'id': 'v3.14', 'status': 'stable', 'updated': '2022-09-01T00:00:00Z',
                'links': [{'rel': 'self', 'href': 'http://127.0.0.1:%d/v3/' % (self.base + 3)}],
                'media-types': [{'base': 'application/json',
                                 'type': 'application/vnd.openstack.identity-v3+json'}]}

    def do_GET(self):
        p = self.path_only()
        if p == '':
            return self.reply(300, {'versions': {'values': [self.version()]}})
        if p == '/v3':
            return self.reply(200, {'version': self.version()})
        return self.not_found()

    def do_POST(self):
        if self.path_only() != '/v3/auth/tokens':
            return self.not_found()
        auth = self.body().get('auth', {})
        identity = auth.get('identity', {})
        if 'token' in identity.get('methods', []):
            token = identity.get('token', {}).get('id', '')
            user, _, project = token.partition(':')
        else:
            u = identity.get('password', {}).get('user', {})
            user = u.get('name') or u.get('id') or ''
            scope = auth.get('scope', {}).get('project', {})
            project = scope.get('id') or scope.get('name') or user
        if not user:
            return self.reply(401, {'error': {'code': 401, 'title': 'Unauthorized',
                                              'message': 'no user in the request'}})
        project = project or user
        token = '%s:%s' % (user, project)
        self.reply(201, {'token': {
            'methods': identity.get('methods', ['password']),
            'expires_at': '2099-01-01T00:00:00.000000Z',
            'issued_at': '2026-01-01T00:00:00.000000Z',
            'audit_ids': ['tether-test'],
            'user': {'id': user, 'name': user, 'domain': {'id': 'default', 'name': 'Default'}},
            'project': {'id': project, 'name': project,
                        'domain': {'id': 'default', 'name': 'Default'}},
            'roles': [{'id': 'admin', 'name': 'admin'}],
            'catalog': self.catalog(project),
        }}, headers=[('X-Subject-Token', token)])

    def catalog(self, project):
        b = self.base
        services = [
            ('compute', 'nova', 'http://127.0.0.1:%d/v2.1' % b),
            ('block-storage', 'cinder', 'http://127.0.0.1:%d/v3/%s' % (b + 1, project)),
            ('placement', 'placement', 'http://127.0.0.1:%d' % (b + 2)),
            ('identity', 'keystone', 'http://127.0.0.1:%d/v3' % (b + 3)),
            ('image', 'glance', 'http://127.0.0.1:%d' % (b + 4)),
            ('network', 'neutron', 'http://127.0.0.1:%d' % (b + 5)),
        ]
        return [{'type': t, 'name': n, 'id': t, 'endpoints': [
            {'id': '%s-%s' % (t, i), 'interface': i, 'region': 'RegionOne',
             'region_id': 'RegionOne', 'url': url} for i in ('public', 'internal', 'admin')]}
            for t, n, url in services]


def main(argv):
    if len(argv) != 2:
        sys.stderr.write('usage: stubs.py PORT_BASE\n')
        sys.exit(2)
    base = int(argv[1])
    Keystone.base = base
    servers = [ThreadingHTTPServer(('127.0.0.1', base + off), cls)
               for off, cls in ((3, Keystone), (4, Glance), (5, Neutron))]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print('stubs: keystone :%d, glance :%d, neutron :%d' % (base + 3, base + 4, base + 5), flush=True)
    threading.Event().wait()


if __name__ == '__main__':
    main(sys.argv)
