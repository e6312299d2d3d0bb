"""The API representation of nodes and ports; secrets are masked the way Ironic does, in
every field: a rule may copy a password anywhere, and the ramdisk may send one."""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from inspection.api.context import ctx
from inspection.api.node_fields import FIELD_VERSIONS, INTERFACE_FIELDS
from inspection.api.versions import allows, resource_links
from inspection.common.secret_text import mask_text
from inspection.db.models import AVAILABLE, INSPECT_WAIT, INSPECTING, Node, Port
from inspection.rules.masking import DISPLAY_MASK, masked

# Columns shown in a node list without ?detail=true (Ironic's brief list, and ours).
BRIEF_NODE_FIELDS = ("uuid", "name", "driver", "instance_uuid", "power_state",
                     "provision_state", "maintenance", "auto_discovered")
NODE_FIELDS = ("uuid", "name", "driver", "driver_info", "driver_internal_info", "properties",
               "extra", "instance_info", "provision_state", "target_provision_state",
               "inspect_interface", "reservation", "last_error", "maintenance",
               "maintenance_reason", "inspection_started_at", "inspection_finished_at",
               "conductor_group", "resource_class", "auto_discovered", "fault", "traits",
               "instance_uuid", "power_state", "target_power_state", "owner", "lessee",
               "description",
               "protected", "protected_reason", "retired", "retired_reason", "shard",
               "parent_node", "network_data",
               *(f for f in INTERFACE_FIELDS if f != "inspect_interface"),
               "chassis_uuid", "console_enabled", "provision_updated_at", "clean_step",
               "deploy_step", "service_step", "raid_config", "target_raid_config",
               "conductor", "allocation_uuid", "automated_clean", "boot_mode", "secure_boot",
               "disable_power_off", "created_at", "updated_at")
#: Node fields that are no column of ``nodes``: this service has no cleaning, deployment,
#: servicing, RAID, console or allocations, so they are what Ironic shows for a node that
#: never had them.
_UNUSED_FIELDS = {"fault": None, "console_enabled": False,
                  "provision_updated_at": None, "clean_step": {}, "deploy_step": {},
                  "service_step": {}, "raid_config": {}, "target_raid_config": {},
                  "allocation_uuid": None}
COMPUTED_NODE_FIELDS = (*_UNUSED_FIELDS, "traits", "conductor")
#: Links to a node's sub-resources that Ironic adds to a full view, by the version (1.x)
#: that added each.
_NODE_SUB_LINKS = {"ports": 1, "states": 14, "portgroups": 24, "volume": 32}
#: What ``?fields=`` may name for nodes; ``links`` is always shown.
NODE_FIELD_CHOICES = NODE_FIELDS
PORT_FIELDS = ("uuid", "address", "node_uuid", "portgroup_uuid", "pxe_enabled", "extra",
               "local_link_connection", "physical_network", "internal_info", "is_smartnic",
               "name", "created_at", "updated_at")
#: The minor API version (1.x) at which Ironic started showing and accepting each port field.
PORT_FIELD_VERSIONS = {"internal_info": 18, "pxe_enabled": 19, "local_link_connection": 19,
                       "portgroup_uuid": 24, "physical_network": 34, "is_smartnic": 53,
                       "name": 88}
_DICT_FIELDS = ("driver_info", "driver_internal_info", "instance_info", "properties", "extra",
                "network_data")


def mask_secrets(value: Any) -> Any:
    """A copy of ``value`` with every secret (by key name, and URL passwords) shown as
    Ironic shows it, ``******``."""
    return masked(value, DISPLAY_MASK)


def plain(value: Any) -> Any:
    """``value`` as JSON shows it (a timestamp in ISO 8601 with its zone)."""
    # Stored naive in UTC (as Ironic does); shown with the zone, as Ironic shows them.
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value


def shown_state(state: str | None) -> str | None:
    """A provision state as the request's API version names it (as Ironic renames them)."""
    if state == AVAILABLE and not allows(2):
        return None  # 1.1's NOSTATE
    if state == INSPECT_WAIT and not allows(39):
        return INSPECTING
    return state


def node_view(node: Node, detail: bool = True, fields: Sequence[str] | None = None,
              traits: Sequence[str] = ()) -> dict:
    """A node as the API shows it (``fields``, if given, instead of the brief or full set);
    ``traits`` are the node's, read by the caller (a separate table)."""
    names = [name for name in fields or (NODE_FIELDS if detail else BRIEF_NODE_FIELDS)
             # hidden from a client older than the field, as Ironic hides it
             if allows(FIELD_VERSIONS.get(name, 1))]
    computed = {**_UNUSED_FIELDS, "traits": sorted(traits), "conductor": ctx().conf.host}
    data = {name: computed[name] if name in computed else plain(getattr(node, name))
            for name in names}
    for name in _DICT_FIELDS:
        if name in data:
            data[name] = mask_secrets(data[name] or {})
    if data.get("last_error"):
        data["last_error"] = mask_text(data["last_error"], DISPLAY_MASK)
    if "maintenance" in data:
        data["maintenance"] = bool(data["maintenance"])
    if "provision_state" in data:
        data["provision_state"] = shown_state(data["provision_state"])
    for name in ("auto_discovered", "protected", "retired", "disable_power_off"):
        if name in data:
            data[name] = bool(data[name])
    if "conductor_group" in data:
        data["conductor_group"] = data["conductor_group"] or ""
    data["links"] = resource_links(f"nodes/{node.uuid}")
    if detail and not fields:
        data.update({name: resource_links(f"nodes/{node.uuid}/{name}")
                     for name, minor in _NODE_SUB_LINKS.items() if allows(minor)})
    return data


def port_view(port: Port, node_uuid: str | None, fields: Sequence[str] | None = None) -> dict:
    """A port as the API shows it (only ``fields`` if given; lists show every field, a
    superset of Ironic's brief list)."""
    # Port groups, smart NICs and port names are no feature of this service: shown as
    # Ironic shows a port without them.
    full = {"uuid": port.uuid, "address": port.address, "node_uuid": node_uuid,
            "portgroup_uuid": None, "is_smartnic": False, "name": None,
            "pxe_enabled": bool(port.pxe_enabled), "extra": port.extra or {},
            "local_link_connection": port.local_link_connection or {},
            "physical_network": port.physical_network,
            "internal_info": port.internal_info or {},
            "created_at": port.created_at, "updated_at": port.updated_at}
    names = [name for name in fields or PORT_FIELDS
             if allows(PORT_FIELD_VERSIONS.get(name, 1))]
    data = {name: plain(full[name]) for name in names}
    for name in ("extra", "local_link_connection", "internal_info"):
        if name in data:
            data[name] = mask_secrets(data[name])
    data["links"] = resource_links(f"ports/{port.uuid}")
    return data
