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
    (r"/v1/portgroups(/.*)?", "/v1/portgroups", "port group management"),
    (r"/v1/volume(/.*)?", "/v1/volume", "volume management"),
    (r"/v1/(lookup|heartbeat)(/.*)?", "/v1/lookup, /v1/heartbeat",
     "deploy agent lookup and heartbeat handling"),
    (r"/v1/conductors(/.*)?", "/v1/conductors", "conductor listing"),
    (r"/v1/allocations(/.*)?", "/v1/allocations", "allocation management"),
    (r"/v1/deploy_templates(/.*)?", "/v1/deploy_templates", "deploy template management"),
    (r"/v1/runbooks(/.*)?", "/v1/runbooks", "runbook management"),
    (r"/v1/events(/.*)?", "/v1/events", "network event handling"),
    (r"/v1/nodes/validate", "/v1/nodes/validate", "interface validation"),
    (_NODE + r"/states/power", "/v1/nodes/{node}/states/power", "power control"),
    (_NODE + r"/states", "/v1/nodes/{node}/states", "the node's state summary"),
    (_NODE + r"/states/raid", "/v1/nodes/{node}/states/raid", "RAID configuration"),
    (_NODE + r"/states/console", "/v1/nodes/{node}/states/console", "the serial console"),
    (_NODE + r"/states/boot_mode", "/v1/nodes/{node}/states/boot_mode",
     "boot mode control"),
    (_NODE + r"/states/secure_boot", "/v1/nodes/{node}/states/secure_boot",
     "secure boot control"),
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
    (_NODE + r"/volume(/.*)?", "/v1/nodes/{node}/volume", "volume management"),
    (_NODE + r"/bios(/.*)?", "/v1/nodes/{node}/bios", "BIOS settings management"),
    (_NODE + r"/allocation", "/v1/nodes/{node}/allocation", "allocation management"),
    (_NODE + r"/history(/.*)?", "/v1/nodes/{node}/history", "node history"),
    (_NODE + r"/firmware(/.*)?", "/v1/nodes/{node}/firmware", "firmware management"),
    (_NODE + r"/vmedia(/.*)?", "/v1/nodes/{node}/vmedia", "virtual media management"),
    (_NODE + r"/portgroups(/.*)?", "/v1/nodes/{node}/portgroups", "port group management"),
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
