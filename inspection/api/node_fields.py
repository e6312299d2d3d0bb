"""Ironic's node fields beyond enrolment (hardware interfaces, owner and lessee, description,
protection, retirement, shard, parent node, network data): the API version that shows each,
and Ironic's rules on their values and on when they may change."""

from typing import Any

import jsonschema

from inspection.api.context import to_bool
from inspection.api.errors import ApiError
from inspection.db.models import ACTIVE, AVAILABLE, ENROLL, INSPECT_WAIT, INSPECTING, MANAGEABLE

#: Ironic's hardware interfaces (``<name>_interface`` node fields).
INTERFACES = ("bios", "boot", "console", "deploy", "firmware", "inspect", "management",
              "network", "power", "raid", "rescue", "storage", "vendor")
INTERFACE_FIELDS = tuple(f"{name}_interface" for name in INTERFACES)
_NO = {"bios": "no-bios", "console": "no-console", "firmware": "no-firmware",
       "raid": "no-raid", "rescue": "no-rescue", "storage": "noop", "network": "noop",
       "boot": "ipxe", "deploy": "direct", "inspect": "agent"}
#: The interfaces Ironic gives a node of each hardware type when none is named (its
#: defaults with each type's own implementations enabled); the inspect interface defaults
#: to ``agent``, the one this service inspects with, whatever the type.
HARDWARE_DEFAULTS: dict[str, dict[str, str]] = {
    "fake-hardware": {**dict.fromkeys(INTERFACES, "fake"), "inspect": "agent",
                      "network": "noop", "storage": "noop"},
    "ipmi": {**_NO, "management": "ipmitool", "power": "ipmitool", "vendor": "ipmitool"},
    "redfish": {**_NO, "bios": "redfish", "firmware": "redfish", "management": "redfish",
                "power": "redfish", "vendor": "redfish"},
}


def fill_interfaces(values: dict, driver: str | None) -> None:
    """Give each unset interface field of ``values`` the hardware type's default (as
    Ironic does; a type without known defaults keeps them unset)."""
    defaults = HARDWARE_DEFAULTS.get(driver or "", {})
    for name in INTERFACES:
        if name != "inspect" and values.get(f"{name}_interface") is None \
                and name in defaults:
            values[f"{name}_interface"] = defaults[name]
#: The minor API version (1.x) at which Ironic 39 started showing and accepting each field;
#: a field not listed here is in every version.
FIELD_VERSIONS: dict[str, int] = {
    "driver_internal_info": 3, "name": 5, "inspection_started_at": 6,
    "inspection_finished_at": 6, "network_interface": 20, "resource_class": 21,
    **{f"{name}_interface": 31 for name in ("boot", "console", "deploy", "inspect",
                                            "management", "power", "raid", "vendor")},
    "storage_interface": 33, "traits": 37, "rescue_interface": 38, "bios_interface": 40,
    "fault": 42, "conductor_group": 46, "protected": 48, "protected_reason": 48,
    "owner": 50, "description": 51, "retired": 61, "retired_reason": 61, "lessee": 65,
    "network_data": 66, "shard": 82, "parent_node": 83, "firmware_interface": 86,
    "clean_step": 7, "raid_config": 12, "target_raid_config": 12, "deploy_step": 44,
    "automated_clean": 47, "conductor": 49, "allocation_uuid": 52, "boot_mode": 75,
    "secure_boot": 75, "service_step": 87, "disable_power_off": 95,
}
#: String fields added here (``inspect_interface`` is an enrolment field) and their longest
#: value: Ironic's 4096 for descriptions, the column's size otherwise (reasons are capped
#: too, so a MySQL TEXT column always holds them).
STR_FIELDS = {**dict.fromkeys((f for f in INTERFACE_FIELDS if f != "inspect_interface"), 255),
              "owner": 255, "lessee": 255, "description": 4096, "shard": 255,
              "parent_node": 36, "protected_reason": 4096, "retired_reason": 4096}
BOOL_FIELDS = ("protected", "retired")
#: What ``POST /v1/nodes`` takes besides the enrolment fields (Ironic's create schema: no
#: protection, which only a deployed node can have).
CREATE_FIELDS = (*STR_FIELDS.keys() - {"protected_reason"}, "retired", "network_data")
#: What a PATCH may change besides the enrolment fields (Ironic's PATCH_ALLOWED_FIELDS).
PATCHABLE = (*STR_FIELDS, *BOOL_FIELDS, "network_data")
#: What a removed field becomes.
DEFAULTS: dict[str, Any] = {**dict.fromkeys(STR_FIELDS), "protected": False,
                            "retired": False, "network_data": {}}
#: States in which Ironic lets a node's interfaces change (any state in maintenance).
INTERFACE_UPDATE_STATES = (ENROLL, INSPECTING, INSPECT_WAIT, MANAGEABLE, AVAILABLE)
#: Where a node may be made protected (Ironic: a deployed node).
PROTECT_STATES = (ACTIVE, "rescue")

_ID = {"type": "string", "minLength": 1}
_MAC = {"type": "string", "pattern": "^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$"}
#: The OpenStack ``network_data.json`` layout (links, networks and services), as Ironic
#: checks it: each link, network and service has the keys a config-drive consumer needs.
NETWORK_DATA_SCHEMA = {
    "type": "object",
    "required": ["links", "networks", "services"],
    "properties": {
        "links": {"type": "array", "items": {
            "type": "object", "required": ["id", "type"],
            "properties": {"id": _ID, "type": _ID, "ethernet_mac_address": _MAC,
                           "vlan_mac_address": _MAC,
                           "mtu": {"type": ["number", "null"], "minimum": 1, "maximum": 65535},
                           "vlan_id": {"type": "integer"}, "vlan_link": _ID,
                           "bond_links": {"type": "array", "items": _ID}},
            "allOf": [
                {"if": {"properties": {"type": {"const": "vlan"}}},
                 "then": {"required": ["vlan_mac_address", "vlan_link", "vlan_id"]},
                 "else": {"required": ["ethernet_mac_address"]}},
                {"if": {"properties": {"type": {"const": "bond"}}},
                 "then": {"required": ["bond_mode", "bond_links"]}}]}},
        "networks": {"type": "array", "items": {
            "type": "object", "required": ["id", "link", "network_id", "type"],
            "properties": {"id": _ID, "link": _ID, "network_id": _ID, "type": _ID,
                           "ip_address": {"type": "string"}, "netmask": {"type": "string"},
                           "routes": {"type": "array", "items": {
                               "type": "object",
                               "required": ["network", "netmask", "gateway"]}}}}},
        "services": {"type": "array", "items": {
            "type": "object", "required": ["address", "type"],
            "properties": {"address": _ID, "type": _ID}}},
    },
}
_NETWORK_DATA = jsonschema.Draft7Validator(NETWORK_DATA_SCHEMA)


def network_data_problems(value: object) -> list[str]:
    """Why ``value`` cannot be a node's ``network_data`` (null and {} are fine)."""
    if value is None or value == {}:
        return []
    if not isinstance(value, dict):
        return ["network_data: must be an object (OpenStack's network_data.json layout)"]
    error = jsonschema.exceptions.best_match(_NETWORK_DATA.iter_errors(value))
    if error is None:
        return []
    where = "/".join(str(p) for p in error.absolute_path)
    return [f"network_data{'/' + where if where else ''}: {error.message[:200]} "
            f"(OpenStack's network_data.json layout: links, networks, services)"]


def check(values: dict, names: tuple[str, ...] | Any) -> list[str]:
    """Validate (and coerce in place) the fields of ``names`` found in ``values``; the
    problems, each naming its field."""
    problems = []
    for name in names:
        if name not in values:
            continue
        value = values[name]
        if name in STR_FIELDS and value is not None:
            if not isinstance(value, str) or len(value) > STR_FIELDS[name]:
                problems.append(f"{name}: must be a string of at most {STR_FIELDS[name]} "
                                f"characters")
            elif name in INTERFACE_FIELDS and not value.strip():
                problems.append(f"{name}: must name an interface (or be removed for the "
                                f"hardware type's default)")
        elif name in BOOL_FIELDS:
            try:
                values[name] = False if value is None else to_bool(name, value)
            except ApiError as exc:
                problems.append(exc.message)
        elif name == "network_data":
            problems.extend(network_data_problems(value))
            values[name] = value or {}
    return problems


def reason_problems(values: dict) -> list[str]:
    """A protection or retirement reason given without its flag (refused by Ironic)."""
    return [f"{reason}: can only be set when {flag} is True"
            for flag, reason in (("protected", "protected_reason"),
                                 ("retired", "retired_reason"))
            if values.get(reason) and not values.get(flag)]


def check_transition(node_uuid: str, state: str, maintenance: bool, before: dict,
                     after: dict) -> None:
    """Refuse (409) what Ironic's conductor refuses in the node's provision state, and clear
    a reason whose flag was unset, as Ironic does (``after`` is changed in place)."""
    if after.get("protected") != before.get("protected"):
        if not after["protected"]:
            after["protected_reason"] = None
        elif state not in PROTECT_STATES:
            raise ApiError(409, f"Node {node_uuid} can only be made protected in provision "
                                f"states 'active' or 'rescue', the current state is "
                                f"'{state}'")
    if after.get("retired") != before.get("retired"):
        if not after["retired"]:
            after["retired_reason"] = None
        elif state == AVAILABLE:
            raise ApiError(409, f"Node {node_uuid} can not have 'retired' set in provision "
                                f"state 'available', the current state is '{state}'")
    for flag, reason in (("protected", "protected_reason"), ("retired", "retired_reason")):
        if after.get(reason) and after.get(reason) != before.get(reason) \
                and not after.get(flag):
            raise ApiError(400, f"The {reason} field can only be set when {flag} is True")
    if after.get("driver") != before.get("driver") and after.get("driver") != "fake-hardware":
        fake = [f for f in INTERFACE_FIELDS if str(after.get(f) or "").startswith("fake")]
        if fake:  # as Ironic: the fake interfaces belong to fake-hardware alone
            raise ApiError(400, f"Interface {fake[0]}={after[fake[0]]!r} is not valid for "
                                f"hardware type {after.get('driver')!r}: change it too, or "
                                f"pass reset_interfaces=true")
    changed = [f for f in INTERFACE_FIELDS if f in after and after[f] != before.get(f)]
    if changed and not maintenance and state not in INTERFACE_UPDATE_STATES:
        raise ApiError(409, f"Node {node_uuid} can not have {changed[0]} updated unless it "
                            f"is in one of allowed ({', '.join(INTERFACE_UPDATE_STATES)}) "
                            f"states or in maintenance mode. Current state is '{state}'.")
