"""The API representation of nodes and ports; secrets are masked the way Ironic does, in
every field: a rule may copy a password anywhere, and the ramdisk may send one."""

from datetime import datetime
from typing import Any

from inspection.common.url_credentials import mask_url_passwords
from inspection.db.models import Node, Port
from inspection.rules.masking import DISPLAY_MASK, masked

# Columns shown in a node list without ?detail=true (as Ironic's brief list).
BRIEF_NODE_FIELDS = ("uuid", "name", "driver", "provision_state", "maintenance",
                     "auto_discovered")
NODE_FIELDS = ("uuid", "name", "driver", "driver_info", "driver_internal_info", "properties",
               "extra", "instance_info", "provision_state", "target_provision_state",
               "inspect_interface", "reservation", "last_error", "maintenance",
               "inspection_started_at", "inspection_finished_at", "conductor_group",
               "resource_class", "auto_discovered", "created_at", "updated_at")
_DICT_FIELDS = ("driver_info", "driver_internal_info", "instance_info", "properties", "extra")


def mask_secrets(value: Any) -> Any:
    """A copy of ``value`` with every secret (by key name, and URL passwords) shown as
    Ironic shows it, ``******``."""
    return masked(value, DISPLAY_MASK)


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def node_view(node: Node, detail: bool = True) -> dict:
    """A node as the API shows it."""
    fields = NODE_FIELDS if detail else BRIEF_NODE_FIELDS
    data = {name: _plain(getattr(node, name)) for name in fields}
    for name in _DICT_FIELDS:
        if name in data:
            data[name] = mask_secrets(data[name] or {})
    if data.get("last_error"):
        data["last_error"] = mask_url_passwords(data["last_error"], DISPLAY_MASK)
    if "maintenance" in data:
        data["maintenance"] = bool(data["maintenance"])
    if "auto_discovered" in data:
        data["auto_discovered"] = bool(data["auto_discovered"])
    return data


def port_view(port: Port, node_uuid: str | None) -> dict:
    """A port as the API shows it."""
    return {"uuid": port.uuid, "address": port.address, "node_uuid": node_uuid,
            "pxe_enabled": bool(port.pxe_enabled), "extra": mask_secrets(port.extra or {}),
            "local_link_connection": mask_secrets(port.local_link_connection or {}),
            "physical_network": port.physical_network,
            "created_at": _plain(port.created_at), "updated_at": _plain(port.updated_at)}
