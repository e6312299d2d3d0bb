"""RFC 6902 JSON patches of nodes and ports, with Ironic's rules on what may change.

A patch is applied to the stored values (unmasked, so that patching one ``driver_info`` key
keeps the others' secrets intact), every path's first segment must be a field the client may
update (else 400 "Cannot patch /x. Only the following can be updated: ..." as in Ironic), and
the result is validated as a whole, booleans coerced from "true"/"false" as Ironic does.
"""

import json
import re
import uuid as uuidlib
from typing import Any

import jsonpatch
import jsonpointer

from inspection.api import node_fields
from inspection.api.context import to_bool
from inspection.api.errors import ApiError
from inspection.common.bounded_patch import PatchTooLarge, apply_bounded
from inspection.db.idents import canonical_uuid
from inspection.rules.masking import has_secrets, is_secret_key
from pxe_filter.common.macs import InvalidMAC, normalize_mac

#: Ironic's logical node names: RFC 3986 unreserved characters, so they fit in a URL path.
NODE_NAME = re.compile(r"[A-Za-z0-9._~-]{1,255}")
#: Names a node cannot take: they are paths of the API (``/v1/nodes/detail``).
RESERVED_NODE_NAMES = frozenset({"detail"})
NODE_DICT_FIELDS = ("driver_info", "properties", "extra", "instance_info")
NODE_STR_FIELDS = {"name": 255, "driver": 255, "inspect_interface": 255, "resource_class": 80,
                   "conductor_group": 255}
#: Node fields a PATCH may change (Ironic's updatable fields that this service stores).
NODE_PATCHABLE = (*NODE_DICT_FIELDS, *NODE_STR_FIELDS, "maintenance", "chassis_uuid",
                  "instance_uuid", *node_fields.PATCHABLE)
#: Port fields a PATCH may change.
PORT_PATCHABLE = ("address", "node_uuid", "pxe_enabled", "extra", "local_link_connection",
                  "physical_network")
#: What a removed node field becomes (Ironic resets a removed field to its default).
NODE_DEFAULTS: dict[str, Any] = {"driver_info": {}, "properties": {}, "extra": {},
                                 "instance_info": {}, "name": None, "resource_class": None,
                                 "conductor_group": "", "inspect_interface": "agent",
                                 "maintenance": False, "chassis_uuid": None,
                                 "instance_uuid": None,
                                 **node_fields.DEFAULTS}
PORT_DEFAULTS: dict[str, Any] = {"pxe_enabled": True, "extra": {}, "local_link_connection": {},
                                 "physical_network": None}


def _operations(body: Any) -> list[dict]:
    if not isinstance(body, list) or not body or not all(isinstance(o, dict) for o in body):
        raise ApiError(400, "The request body must be a JSON patch: a non-empty list of "
                            "operations such as {\"op\": \"replace\", \"path\": \"/extra/x\", "
                            "\"value\": 1}")
    return body


def _check_paths(operations: list[dict], patchable: tuple[str, ...]) -> None:
    for operation in operations:
        for key in ("path", "from"):
            path = operation.get(key)
            if key == "from" and path is None:
                continue
            if not isinstance(path, str) or not path.startswith("/"):
                raise ApiError(400, f"Invalid patch: {key} must be a JSON pointer such as "
                                    f"/extra/x")
            field = path[1:].split("/", 1)[0]
            if field not in patchable:
                raise ApiError(400, f"Cannot patch {path[:100]}. Only the following can be "
                                    f"updated: {', '.join(patchable)}")


def _holds_secret(document: dict, pointer: str) -> bool:
    """True if ``pointer`` names a secret, lies inside one, or names a value holding one."""
    steps = [step.replace("~1", "/").replace("~0", "~") for step in pointer.split("/")[1:]]
    if any(is_secret_key(step) for step in steps):
        return True
    try:
        return has_secrets(jsonpointer.resolve_pointer(document, pointer))
    except (jsonpointer.JsonPointerException, TypeError, ValueError):
        return False


def check_secret_reads(document: dict, operations: list[dict]) -> None:
    """Refuse (400) an operation that reads a masked secret before anything is applied:
    ``copy``/``move`` from it (a copy shows it, a move destroys it) and ``test`` on it (an
    oracle), whatever the value. Secrets are written with ``add``/``replace``/``remove``."""
    for operation in operations:
        kind = operation.get("op")
        key = "path" if kind == "test" else "from" if kind in ("copy", "move") else None
        pointer = operation.get(key) if key else None
        if isinstance(pointer, str) and _holds_secret(document, pointer):
            raise ApiError(400, f"Cannot {kind} {pointer[:100]} (a masked secret, or a "
                                f"value holding one): a patch may only add, replace or "
                                f"remove secrets")


def apply(document: dict, body: Any, patchable: tuple[str, ...],
          defaults: dict[str, Any], max_size: int, *, what: str = "node") -> dict:
    """``document`` (the patchable fields) with the patch applied; removed fields get their
    default. ApiError 400 for a malformed patch, a path outside ``patchable``, an operation
    reading a secret (:func:`check_secret_reads`), or a result
    over ``max_size`` bytes of JSON (``[inspection_rules]max_node_size``), refused before
    it is built."""
    operations = _operations(body)
    _check_paths(operations, patchable)
    check_secret_reads(document, operations)
    try:
        result = apply_bounded(document, operations, max_size, what,
                               "[inspection_rules]max_node_size")
    except PatchTooLarge as exc:
        raise ApiError(400, f"Invalid patch: {exc}") from None
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException,
            TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ApiError(400, f"Invalid patch: {str(exc)[:200]}") from None
    return {name: result.get(name, defaults.get(name)) for name in patchable}


def size_problems(values: dict, max_size: int, what: str) -> list[str]:
    """A problem if ``values`` (a new node or port) take more than ``max_size`` bytes of
    JSON, the bound a PATCH has (``[inspection_rules]max_node_size``)."""
    if len(json.dumps(values, default=str)) <= max_size:
        return []
    return [f"the {what} would take more than [inspection_rules]max_node_size = {max_size} "
            f"bytes of JSON"]


def node_name_problems(name: object) -> list[str]:
    """Why ``name`` cannot be a node's name (empty if it can; None is allowed)."""
    if name is None:
        return []
    if not isinstance(name, str) or not NODE_NAME.fullmatch(name):
        return ["name: may hold only letters, digits and '-', '.', '_', '~' (Ironic's "
                "logical names: RFC 3986 unreserved characters), at most 255"]
    if name in RESERVED_NODE_NAMES:
        return [f"name: {name!r} is reserved (a path of the API)"]
    try:
        uuidlib.UUID(name)
    except ValueError:
        return []
    return ["name: must not be a UUID (nodes are found by UUID or name)"]


def check_node(values: dict) -> dict:
    """Validate (and coerce) patched node fields; ApiError 400 listing every problem."""
    problems = node_name_problems(values.get("name"))
    for name, limit in NODE_STR_FIELDS.items():
        value = values.get(name)
        if name == "name" or value is None:
            continue
        if not isinstance(value, str) or len(value) > limit:
            problems.append(f"{name}: must be a string of at most {limit} characters")
    if not values.get("driver"):
        problems.append("driver: cannot be removed or empty (a hardware type such as 'ipmi')")
    for name in NODE_DICT_FIELDS:
        if not isinstance(values.get(name), dict):
            problems.append(f"{name}: must be an object")
    for name in ("chassis_uuid", "instance_uuid"):
        if values.get(name) is not None and canonical_uuid(values[name]) is None:
            problems.append(f"{name}: must be a UUID")
    try:
        values["maintenance"] = to_bool("maintenance", values.get("maintenance"))
    except ApiError as exc:
        problems.append(exc.message)
    problems.extend(node_fields.check(values, node_fields.PATCHABLE))
    if isinstance(values.get("conductor_group"), str):
        values["conductor_group"] = values["conductor_group"].lower()  # as Ironic stores it
    if problems:
        raise ApiError(400, "Invalid node: " + "; ".join(problems), problems=problems)
    return values


def check_port(values: dict) -> dict:
    """Validate (and coerce) patched port fields; ApiError 400 listing every problem."""
    problems = []
    try:
        values["address"] = normalize_mac(values.get("address"))
    except InvalidMAC as exc:
        problems.append(f"address: {exc}")
    node = values.get("node_uuid")
    if not isinstance(node, str) or not (canonical_uuid(node) or NODE_NAME.fullmatch(node)):
        problems.append("node_uuid: required (the node's UUID or name)")
    try:
        values["pxe_enabled"] = to_bool("pxe_enabled", values.get("pxe_enabled"))
    except ApiError as exc:
        problems.append(exc.message)
    for name in ("extra", "local_link_connection"):
        if not isinstance(values.get(name), dict):
            problems.append(f"{name}: must be an object")
    network = values.get("physical_network")
    if network is not None and (not isinstance(network, str) or len(network) > 64):
        problems.append("physical_network: must be a string of at most 64 characters")
    if problems:
        raise ApiError(400, "Invalid port: " + "; ".join(problems), problems=problems)
    return values
