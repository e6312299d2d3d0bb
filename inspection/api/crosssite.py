"""Refusing what a web page in the operator's browser could send (cross-site request
forgery, DNS rebinding), before authentication and before any body is read.

- A body must be ``application/json`` (``application/json-patch+json`` too for PATCH): a
  page can post ``text/plain``, a form or multipart without asking, but not JSON (415).
- A request whose ``Origin`` is neither this service nor in ``[cors]allowed_origin`` is
  refused (403); clients other than browsers send no ``Origin``.
- With ``auth_strategy = noauth``, the ``Host`` must be an IP address, ``localhost``, the
  bound address or ``[api]public_endpoint``'s host (400): a page whose DNS name was rebound to
  this service's address names its own host.
"""

import ipaddress
from urllib.parse import urlsplit

from flask import Flask, Response, request
from oslo_config import cfg
from oslo_middleware import cors

from inspection.api.errors import json_error

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
_WITH_BODY = ("POST", "PUT", "PATCH")


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL, lower-case, default ports dropped."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        return url
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _hostname(host_header: str) -> str:
    """The host of a ``Host`` header, without port, lower-case."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _has_body() -> bool:
    return bool(request.content_length) or "chunked" in request.headers.get(
        "Transfer-Encoding", "").lower()


def install(app: Flask, conf: cfg.ConfigOpts) -> None:
    """Check content types, origins and (noauth) hosts of every request."""
    conf.register_opts(cors.CORS_OPTS, group="cors")
    public = conf.api.public_endpoint
    allowed_origins = {_origin(o) for o in conf.cors.allowed_origin or () if o}
    if public:
        allowed_origins.add(_origin(public))
    names = {"localhost", conf.api.host_ip.lower()}
    if public:
        names.add((urlsplit(public).hostname or "").lower())
    check_host = conf.api.auth_strategy == "noauth"

    @app.before_request
    def refuse_cross_site() -> Response | None:
        host = request.headers.get("Host", "")
        if check_host and not (_is_ip(_hostname(host)) or _hostname(host) in names):
            return json_error(400, f"The Host header {host[:100]!r} does not name this "
                                   f"service: use its address or [api]public_endpoint")
        origin = request.headers.get("Origin")
        if origin is not None and _origin(origin) not in allowed_origins \
                and _origin(origin) != _origin(request.host_url):
            return json_error(403, f"Requests from origin {origin[:100]!r} are not allowed: "
                                   f"add it to [cors]allowed_origin")
        if request.method in _WITH_BODY and (_has_body() or request.mimetype):
            allowed = (JSON, JSON_PATCH) if request.method == "PATCH" else (JSON,)
            if request.mimetype not in allowed:
                return json_error(415, f"Unsupported Content-Type "
                                       f"{request.mimetype[:100] or 'none'!r}: send "
                                       f"{' or '.join(allowed)}")
        return None
