"""API microversions as Ironic negotiates them, and the root and v1 version documents.

Every response carries ``X-OpenStack-Ironic-API-Minimum-Version`` and ``-Maximum-Version``;
a request naming a version (``X-OpenStack-Ironic-API-Version: 1.96``, ``OpenStack-API-Version:
baremetal 1.96`` or ``latest``) outside the range gets 406, as in Ironic, and the version
used is echoed in ``X-OpenStack-Ironic-API-Version``. A request naming none is served as 1.1,
Ironic's minimum, exactly as Ironic serves it. openstacksdk (keystoneauth) refuses every
microversioned call unless ``/`` and ``/v1`` carry ``min_version`` and ``version``.
"""

import re

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request

from inspection.api.context import EXTENSION
from inspection.api.errors import ApiError, json_error

bp = Blueprint("versions", __name__)

HEADER = "X-OpenStack-Ironic-API-Version"
MIN_HEADER = "X-OpenStack-Ironic-API-Minimum-Version"
MAX_HEADER = "X-OpenStack-Ironic-API-Maximum-Version"
#: Ironic's first version, used when a request names none (as Ironic does).
MIN_VERSION = (1, 1)
#: 1.96 is where Ironic added inspection rules, the newest resource this service serves.
MAX_VERSION = (1, 96)
SERVICE_TYPE = "baremetal"


def _text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


MIN_TEXT, MAX_TEXT = _text(MIN_VERSION), _text(MAX_VERSION)


#: A version number: ASCII digits, no more than any real version needs.
_NUMBER = re.compile(r"[0-9]{1,6}")


class VersionNotAcceptable(Exception):
    """The requested version is malformed or outside the supported range (406)."""


def requested_text(headers) -> str | None:
    """The version string a request names, or None (``OpenStack-API-Version`` first)."""
    for value in headers.getlist("OpenStack-API-Version"):
        for item in value.split(","):
            service, _, version = item.strip().partition(" ")
            if service.lower() == SERVICE_TYPE and version.strip():
                return version.strip()
    legacy = headers.get(HEADER)
    return legacy.strip() if legacy is not None else None


def parse(text: str | None) -> tuple[int, int]:
    """The version a request asks for; :class:`VersionNotAcceptable` when it cannot be had."""
    if text is None or not text:
        return MIN_VERSION
    if text.lower() == "latest":
        return MAX_VERSION
    major, dot, minor = text.partition(".")
    # Bounded before int(): 5,000 digits would exceed Python's conversion limit (a 500).
    if not (dot and _NUMBER.fullmatch(major) and _NUMBER.fullmatch(minor)):
        raise VersionNotAcceptable(f"Invalid value for {HEADER} header")
    version = (int(major), int(minor))
    supported = f"The supported version range is: [{MIN_TEXT}, {MAX_TEXT}]."
    if version[0] != MIN_VERSION[0]:
        raise VersionNotAcceptable(f"Mutually exclusive versions requested. Version "
                                   f"{_text(version)} requested but not supported by this "
                                   f"service. {supported}")
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise VersionNotAcceptable(f"Version {_text(version)} was requested but the minor "
                                   f"version is not supported by this service. {supported}")
    return version


def install(app: Flask) -> None:
    """Negotiate the version of every request and label every response."""

    @app.before_request
    def negotiate():
        try:
            g.api_version = parse(requested_text(request.headers))
        except VersionNotAcceptable as exc:
            return json_error(406, str(exc))
        return None

    @app.after_request
    def label(response: Response) -> Response:
        response.headers[MIN_HEADER] = MIN_TEXT
        response.headers[MAX_HEADER] = MAX_TEXT
        version = g.get("api_version")
        if version is not None:
            response.headers[HEADER] = _text(version)
        return response


def current() -> tuple[int, int]:
    """The version the request is served at (1.1 when it names none, as in Ironic)."""
    return g.get("api_version", MIN_VERSION)


def require(minor: int, status: int, message: str) -> None:
    """Refuse, as Ironic does, a request served at a version older than ``1.<minor>``
    (a request naming no version is served at 1.1)."""
    if not allows(minor):
        raise ApiError(status, message)


def allows(minor: int) -> bool:
    """Whether the request may see what Ironic added at ``1.<minor>``."""
    return current() >= (MIN_VERSION[0], minor)


def strips_json_suffix() -> bool:
    """Whether Ironic would strip ``.json`` from this request's path: only when
    ``X-OpenStack-Ironic-API-Version`` names a version below 1.91 (its middleware reads
    that header alone, so a request naming no version keeps the suffix)."""
    text = request.headers.get(HEADER)
    try:
        return bool(text) and parse(text) < (MIN_VERSION[0], 91)
    except VersionNotAcceptable:
        return False


def require_for(minor: int, what: str) -> None:
    """406 naming ``what`` and the version it needs, as Ironic's filters and fields answer."""
    if not allows(minor):
        raise ApiError(406, f"Request not acceptable: {what} needs API version 1.{minor} "
                            f"or newer. The minimal required API version should be "
                            f"1.{minor}")


def base_url() -> str:
    """The URL this API is reached at (no trailing slash), for links: ``[api]public_endpoint``
    or the request's own."""
    conf = current_app.extensions[EXTENSION].conf
    return (conf.api.public_endpoint or request.host_url).rstrip("/")


def link(rel: str, path: str) -> dict:
    """A link as Ironic writes them: ``{"href": absolute URL, "rel": ...}``."""
    return {"href": base_url() + path, "rel": rel}


def resource_links(name: str) -> list[dict]:
    """The self and bookmark links of a resource path such as ``nodes/UUID``, as Ironic gives
    them (the bookmark has no version: unversioned paths are served as v1)."""
    return [link("self", f"/v1/{name}"), link("bookmark", f"/{name}")]


def _version_document() -> dict:
    return {"id": "v1", "links": [link("self", "/v1/")], "status": "CURRENT",
            "min_version": MIN_TEXT, "version": MAX_TEXT}


@bp.get("/")
def root() -> Response:
    """The versions document (as Ironic's root)."""
    return jsonify({"name": "Ironic inspection service",
                    "description": "Inspection, auto-discovery and inspection rules, "
                                   "served with Ironic's Bare Metal API",
                    "default_version": _version_document(),
                    "versions": [_version_document()]})


#: The resources ``/v1`` links to, and the version each is linked from (Ironic's); Ironic
#: takes the callback at 1.1 too, unlisted ("not actually available back in Kilo").
_V1_LINKS = {"chassis": 1, "nodes": 1, "ports": 1, "inspection_rules": 96,
             "continue_inspection": 84}


@bp.get("/v1")
def version() -> Response:
    """The v1 document: the version and a link per resource (as Ironic's)."""
    body = {"id": "v1", "links": [link("self", "/v1/")],
            "media_types": {"base": "application/json",
                            "type": "application/vnd.openstack.ironic.v1+json"},
            "version": _version_document()}
    for name, minor in _V1_LINKS.items():
        if allows(minor):  # as Ironic, only what the request's version may use
            body[name] = [link("self", f"/v1/{name}/"), link("bookmark", f"/{name}/")]
    body["openapi"] = [link("describedby", "/v1/openapi.json")]
    return jsonify(body)
