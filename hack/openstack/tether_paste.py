"""Two paste filters that stand in for what Keystone's middleware would do.

nova_token_context: Nova's noauth2 middleware builds the request context
without the caller's token, so Nova's calls to Glance, Cinder and Neutron made
on the caller's behalf would carry none. The filter runs after noauth2 and
puts the X-Auth-Token on the context, as keystonemiddleware's auth_token
filter and Nova's keystonecontext filter would. It also gives the context the
roles Keystone's token would carry: admin, member and reader for the admin
user (Keystone's admin role implies the other two), member and reader for
any other (noauth2 sets none). Zed's policy defaults read noauth2's is_admin;
2025.1's (enforce_new_defaults) read only roles, and without them answer 403
to the admin API (os-hypervisors) and to project members.

cinder_service_token: keystonemiddleware validates an X-Service-Token and sets
X-Service-Roles from it; Cinder's check that Nova no longer uses an attachment
before someone else deletes it (CVE-2023-2088) trusts requests with the
service role. The filter runs before noauth_include_project_id, drops any
X-Service-Roles a client sends, and sets "service" when an X-Service-Token
is present (Nova sends one, [service_user] in nova.conf). While the file
SERVICE_TOKEN_REFUSED exists in Cinder's state_path, it sets no role, as
Keystone's middleware does for a service user without the service role: to
Cinder, Nova then calls as an ordinary user (a Nova whose service token is
missing or not trusted), and its detaches of attached volumes are refused.
"""
import os

SERVICE_TOKEN_REFUSED = 'service-token-refused'


def nova_token_context(global_conf, **local_conf):
    def wrap(app):
        def call(environ, start_response):
            ctx = environ.get('nova.context')
            if ctx is not None and not ctx.auth_token:
                ctx.auth_token = environ.get('HTTP_X_AUTH_TOKEN')
            if ctx is not None and not ctx.roles:
                ctx.roles = (['admin'] if ctx.is_admin else []) + ['member', 'reader']
            return app(environ, start_response)
        return call
    return wrap


def cinder_service_token(global_conf, **local_conf):
    def wrap(app):
        def call(environ, start_response):
            environ.pop('HTTP_X_SERVICE_ROLES', None)
            if environ.get('HTTP_X_SERVICE_TOKEN') and not refused():
                environ['HTTP_X_SERVICE_ROLES'] = 'service'
            return app(environ, start_response)
        return call
    return wrap


def refused():
    from oslo_config import cfg
    path = getattr(cfg.CONF, 'state_path', None)
    return bool(path) and os.path.exists(os.path.join(path, SERVICE_TOKEN_REFUSED))
