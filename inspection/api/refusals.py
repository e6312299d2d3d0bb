"""Honest refusals: an Ironic endpoint this service does not serve is answered 501 with
Ironic's error body naming the feature, not a bare 404 that reads like "node missing".

The table is consulted only when no route matches the path, so a feature that becomes
available just adds its routes (they win); its entry here may then go.
"""

import re

from flask import Flask, Response, request
from werkzeug.exceptions import NotFound

from inspection.api.errors import http_error, json_error

_NODE = r"/v1/nodes/[^/]+"
#: (path pattern, Ironic's endpoint, the feature it serves); the first match names it.
UNSERVED: list[tuple[str, str, str]] = [
    (r"/v1/drivers", "/v1/drivers", "driver listing"),
    (r"/v1/drivers/.+", "/v1/drivers/{driver}", "driver information"),
    (r"/v1/chassis(/.*)?", "/v1/chassis", "chassis"),
    (r"/v1/portgroups(/.*)?", "/v1/portgroups", "port groups"),
    (r"/v1/volume(/.*)?", "/v1/volume", "volume connectors and targets"),
    (r"/v1/(lookup|heartbeat)(/.*)?", "/v1/lookup, /v1/heartbeat",
     "the deploy agent's lookup and heartbeat"),
    (r"/v1/conductors(/.*)?", "/v1/conductors", "conductor listing"),
    (r"/v1/allocations(/.*)?", "/v1/allocations", "allocations"),
    (r"/v1/deploy_templates(/.*)?", "/v1/deploy_templates", "deploy templates"),
    (r"/v1/runbooks(/.*)?", "/v1/runbooks", "runbooks"),
    (r"/v1/events(/.*)?", "/v1/events", "network events"),
    (r"/v1/shards(/.*)?", "/v1/shards", "shard listing"),
    (r"/v1/nodes/validate", "/v1/nodes/validate", "interface validation"),
    (_NODE + r"/states/power", "/v1/nodes/{node}/states/power", "power control"),
    (_NODE + r"/states", "/v1/nodes/{node}/states", "the node's state summary"),
    (_NODE + r"/states/raid", "/v1/nodes/{node}/states/raid", "RAID configuration"),
    (_NODE + r"/states/console", "/v1/nodes/{node}/states/console", "the serial console"),
    (_NODE + r"/states/boot_mode", "/v1/nodes/{node}/states/boot_mode",
     "boot mode changes"),
    (_NODE + r"/states/secure_boot", "/v1/nodes/{node}/states/secure_boot",
     "secure boot changes"),
    (_NODE + r"/management/boot_device(/supported)?",
     "/v1/nodes/{node}/management/boot_device", "boot device management"),
    (_NODE + r"/management/inject_nmi", "/v1/nodes/{node}/management/inject_nmi",
     "NMI injection"),
    (_NODE + r"/management/indicators(/.*)?", "/v1/nodes/{node}/management/indicators",
     "indicator control"),
    (_NODE + r"/validate", "/v1/nodes/{node}/validate", "interface validation"),
    (_NODE + r"/vendor_passthru(/.*)?", "/v1/nodes/{node}/vendor_passthru",
     "vendor passthru"),
    (_NODE + r"/vifs(/.*)?", "/v1/nodes/{node}/vifs", "VIF attachment"),
    (_NODE + r"/volume(/.*)?", "/v1/nodes/{node}/volume", "volume connectors and targets"),
    (_NODE + r"/bios(/.*)?", "/v1/nodes/{node}/bios", "BIOS settings"),
    (_NODE + r"/allocation", "/v1/nodes/{node}/allocation", "allocations"),
    (_NODE + r"/history(/.*)?", "/v1/nodes/{node}/history", "node history"),
    (_NODE + r"/children", "/v1/nodes/{node}/children", "child node listing"),
    (_NODE + r"/firmware(/.*)?", "/v1/nodes/{node}/firmware", "firmware components"),
    (_NODE + r"/vmedia(/.*)?", "/v1/nodes/{node}/vmedia", "virtual media"),
    (_NODE + r"/portgroups(/.*)?", "/v1/nodes/{node}/portgroups", "port groups"),
    (_NODE + r"/ports(/.*)?", "/v1/nodes/{node}/ports",
     "listing ports by node path (use /v1/ports?node=)"),
]
_COMPILED = [(re.compile(pattern), endpoint, what) for pattern, endpoint, what in UNSERVED]


def refusal(path: str) -> tuple[str, str] | None:
    """``(Ironic's endpoint, feature)`` when ``path`` is an Ironic endpoint not served here."""
    for pattern, endpoint, what in _COMPILED:
        if pattern.fullmatch(path):
            return endpoint, what
    return None


def message(endpoint: str, what: str) -> str:
    """What the client is told: the feature, the endpoint, and where to get it."""
    return (f"{what[0].upper()}{what[1:]} is not available through this service: it serves "
            f"Ironic's API for enrolment, inspection and inspection rules only, not "
            f"{endpoint}. Use a full Ironic deployment for {what}.")


def install(app: Flask) -> None:
    """Answer unserved Ironic endpoints with 501 and the feature's name."""

    def not_found(exc: NotFound) -> Response:
        if request.url_rule is None:  # no route matched (not a handler's own 404)
            found = refusal(request.path.rstrip("/") or "/")
            if found is not None:
                return json_error(501, message(*found))
        return http_error(exc)

    app.register_error_handler(NotFound, not_found)
