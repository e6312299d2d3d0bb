"""The address a request comes from, as the throttles and limits key on it."""

from flask import request
from oslo_config import cfg
from oslo_middleware import opts as middleware_opts


def client_address(behind_proxy: bool) -> str:
    """The client's address: the peer's, or behind a proxy the one the proxy in front of us
    saw: the last entry of ``Forwarded`` or ``X-Forwarded-For`` (earlier entries are whatever
    the client claimed)."""
    forwarded = request.headers.get("Forwarded") if behind_proxy else None
    if forwarded:
        for pair in forwarded.rsplit(",", 1)[-1].split(";"):
            key, _, value = pair.partition("=")
            if key.strip().lower() == "for":
                return value.strip().strip('"')
    # HTTPProxyToWSGI put X-Forwarded-For, whole, in REMOTE_ADDR.
    return (request.remote_addr or "").rsplit(",", 1)[-1].strip()


def proxy_headers_parsed(conf: cfg.ConfigOpts) -> bool:
    """``[oslo_middleware]enable_proxy_headers_parsing`` (registered here if need be)."""
    for group, opts in middleware_opts.list_opts_http_proxy_to_wsgi():
        conf.register_opts(opts, group=group)  # HTTPProxyToWSGI registers them later
    return conf.oslo_middleware.enable_proxy_headers_parsing
