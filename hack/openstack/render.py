"""Writes the configuration of one OpenStack test world.

Renders nova.conf, cinder.conf and placement.conf from the templates beside
this file, and copies the api-paste.ini files of the installed release (taken
from its nova-common and cinder-common packages) with tether's two paste
filters put into the noauth pipelines:

  nova:   after noauth2, tether_paste:nova_token_context
  cinder: before noauth_include_project_id, tether_paste:cinder_service_token

With "scale" after the port base, nova.conf also switches Nova's quotas off
(the driver that ignores them), for worlds of thousands of servers; the
default keeps Nova's quotas (10 servers a project), which the tests live with.

Usage: render.py DIR PACKAGE_CACHE HOST PORT_BASE [scale]
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The port of each service, as an offset from the port base.
OFFSETS = {
    'NOVA_PORT': 0,
    'CINDER_PORT': 1,
    'PLACEMENT_PORT': 2,
    'KEYSTONE_PORT': 3,
    'GLANCE_PORT': 4,
    'NEUTRON_PORT': 5,
}


# What "scale" adds to nova.conf. The conductor rechecks quotas after it
# creates a request's servers and puts those over the limit in ERROR, so
# parallel boots past the default of 10 servers fail without it.
#
# The fake compute driver reports one node, and Nova's resource tracker,
# on every claim, reads the allocations of each server on the claim's node
# from Placement one by one (get_allocations_for_provider_tree): booting n
# servers on one node costs about n*n/2 Placement reads (at 1,000 servers,
# about six servers a minute). [tether] fake_nodes, which nova_all.py reads
# (Nova does not), gives the one compute service that many nodes, as a
# cloud has many compute hosts.
SCALE_NOVA = """
# Rendered with "scale": Nova's quotas are off (hack/openstack.sh up --scale).
[quota]
driver = nova.quota.NoopQuotaDriver

# Read by hack/openstack/nova_all.py, not by Nova: the fake driver's nodes.
[tether]
fake_nodes = 25
"""


def fail(msg):
    sys.stderr.write('render: %s\n' % msg)
    sys.exit(1)


def render(template, values):
    with open(os.path.join(HERE, template)) as f:
        text = f.read()
    for key, value in values.items():
        text = text.replace('@%s@' % key, str(value))
    left = sorted(set(re.findall(r'@[A-Z_]+@', text)))
    if left:
        fail('%s: unknown placeholders %s' % (template, ', '.join(left)))
    return text


def insert_filter(text, pipeline, anchor, name, after, source):
    """Puts filter name beside anchor in the pipeline line `pipeline = ...`."""
    out, done = [], False
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep and key.strip() == pipeline:
            words = value.split()
            if anchor not in words:
                fail('%s: pipeline %r has no %r' % (source, pipeline, anchor))
            i = words.index(anchor) + (1 if after else 0)
            words.insert(i, name)
            line = '%s= %s' % (key, ' '.join(words))
            done = True
        out.append(line)
    if not done:
        fail('%s: no pipeline %r: this release\'s api-paste.ini differs from the one tether '
             'knows (nova 26 / cinder 21, Debian bookworm)' % (source, pipeline))
    return '\n'.join(out) + '\n'


def paste(cache, project, pipeline, anchor, name, after, factory):
    source = os.path.join(cache, 'usr/share/%s-common/api-paste.ini' % project)
    try:
        with open(source) as f:
            text = f.read()
    except OSError as e:
        fail('cannot read %s (%s): run hack/openstack.sh install' % (source, e.strerror))
    text = insert_filter(text, pipeline, anchor, name, after, source)
    text += '\n[filter:%s]\npaste.filter_factory = tether_paste:%s\n' % (name, factory)
    return text


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


def main(argv):
    if len(argv) not in (5, 6) or len(argv) == 6 and argv[5] != 'scale':
        fail('usage: render.py DIR PACKAGE_CACHE HOST PORT_BASE [scale]')
    d, cache, host, base = argv[1], argv[2], argv[3], int(argv[4])
    scale = len(argv) == 6
    values = {'DIR': d, 'CACHE': cache, 'HOST': host}
    values.update({k: base + off for k, off in OFFSETS.items()})
    write(os.path.join(d, 'nova/nova.conf'), render('nova.conf.in', values) + (SCALE_NOVA if scale else ''))
    write(os.path.join(d, 'cinder/cinder.conf'), render('cinder.conf.in', values))
    write(os.path.join(d, 'placement/placement.conf'), render('placement.conf.in', values))
    nova = paste(cache, 'nova', 'noauth2', 'noauth2', 'tethertoken', True, 'nova_token_context')
    write(os.path.join(d, 'nova/api-paste.ini'), nova)
    cinder = paste(cache, 'cinder', 'noauth_include_project_id', 'noauth_include_project_id',
                   'tetherservice', False, 'cinder_service_token')
    write(os.path.join(d, 'cinder/api-paste.ini'), cinder)


if __name__ == '__main__':
    main(sys.argv)
