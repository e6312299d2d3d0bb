"""The WSGI middleware around the Flask app, as Ironic stacks it (oslo.middleware,
keystonemiddleware).

:func:`wrap` applies :func:`layers` in order, innermost first; each layer is one small function,
so that adding one (e.g. a proxy header parser) is one line in the list.
"""

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from oslo_config import cfg
from oslo_middleware import cors, healthcheck, request_id
from oslo_middleware.http_proxy_to_wsgi import HTTPProxyToWSGI

from inspection import conf as inspection_conf

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]

#: Paths that need no token with [api]auth_strategy = keystone, as Ironic's public routes:
#: the version documents, the ramdisk callback and the API description.
PUBLIC_PATHS = re.compile(r"^/(v1/?)?$|^/v1/(continue_inspection|openapi\.json)/?$")
HEALTHCHECK_PATH = "/healthcheck"

VERSION_HEADERS = inspection_conf.VERSION_HEADERS


class InspectionCORS(cors.CORS):
    """CORS that accepts the version and token headers as simple headers, as Ironic does."""

    simple_headers = [*cors.CORS.simple_headers, "X-Auth-Token", *VERSION_HEADERS]


class RequestId(request_id.RequestId):
    """``x-openstack-request-id``, plus ``openstack-request-id`` as Ironic sends too."""

    compat_headers = ["openstack-request-id"]


def _ironic_error(app: WsgiApp) -> WsgiApp:
    """Rewrite keystonemiddleware's 401 body into Ironic's error body (headers kept)."""
    def wrapped(environ: dict, start_response: Callable) -> Iterable[bytes]:
        refused: list = []

        def capture(status: str, headers: list, exc_info: Any = None) -> Any:
            if status.startswith("401"):
                refused.append((status, headers))
                return lambda data: None
            return start_response(status, headers, exc_info)

        body = app(environ, capture)
        if not refused:
            return body
        if hasattr(body, "close"):
            body.close()
        status, headers = refused[0]
        fault = {"faultstring": "Authentication required: send a valid Keystone token "
                                "(X-Auth-Token)", "faultcode": "Client", "debuginfo": None}
        payload = json.dumps({"error_message": json.dumps(fault)}).encode()
        kept = [(k, v) for k, v in headers
                if k.lower() not in ("content-type", "content-length")]
        start_response(status, [*kept, ("Content-Type", "application/json"),
                                ("Content-Length", str(len(payload)))])
        return [payload]

    return wrapped


def keystone_problem(conf: cfg.ConfigOpts) -> str | None:
    """What makes ``[keystone_authtoken]`` unusable (None when it can check tokens)."""
    from keystoneauth1 import loading  # noqa: PLC0415
    from keystonemiddleware import opts  # noqa: PLC0415

    for group, options in opts.list_auth_token_opts():
        conf.register_opts(options, group=group)
    loading.register_auth_conf_options(conf, "keystone_authtoken")
    section = conf.keystone_authtoken
    missing = [name for name in ("www_authenticate_uri", "auth_type")
               if not getattr(section, name)]
    if missing:
        return (f"[api]auth_strategy = keystone needs [keystone_authtoken] "
                f"{' and '.join(missing)} (and the service user's credentials): see "
                f"'Inside an OpenStack cloud' in docs/install.md")
    return None


def keystone_auth(app: WsgiApp, conf: cfg.ConfigOpts) -> WsgiApp:
    """keystonemiddleware's ``auth_token`` ([keystone_authtoken]) except on public paths."""
    from keystonemiddleware import auth_token  # noqa: PLC0415

    protected = _ironic_error(auth_token.AuthProtocol(app, {"oslo_config_config": conf}))

    def routed(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if PUBLIC_PATHS.match(environ.get("PATH_INFO", "") or "/"):
            return app(environ, start_response)
        return protected(environ, start_response)

    return routed


def with_healthcheck(app: WsgiApp, conf: cfg.ConfigOpts) -> WsgiApp:
    """``/healthcheck`` answered before authentication (only that path: the middleware
    answers every request it sees)."""
    if not conf.healthcheck.enabled:
        return app
    checker = healthcheck.Healthcheck(app, conf)

    def routed(environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "") or "/"
        if path == HEALTHCHECK_PATH or path.startswith(HEALTHCHECK_PATH + "/"):
            return checker(environ, start_response)
        return app(environ, start_response)

    return routed


def layers(conf: cfg.ConfigOpts) -> list[Callable[[WsgiApp], WsgiApp]]:
    """The middleware, innermost first."""
    inspection_conf.set_defaults()
    stack: list[Callable[[WsgiApp], WsgiApp]] = []
    if conf.api.auth_strategy == "keystone":
        stack.append(lambda app: keystone_auth(app, conf))
    stack += [
        lambda app: with_healthcheck(app, conf),
        lambda app: RequestId(app, conf),
        lambda app: InspectionCORS(app, conf),
        # Outermost, as in Ironic: everything inside sees the scheme and host the client
        # used ([oslo_middleware]enable_proxy_headers_parsing).
        lambda app: HTTPProxyToWSGI(app, conf),
    ]
    return stack


def wrap(app: WsgiApp, conf: cfg.ConfigOpts) -> WsgiApp:
    """``app`` inside every layer of :func:`layers`."""
    for layer in layers(conf):
        app = layer(app)
    return app
