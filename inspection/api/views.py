"""The API representation of nodes and ports; secrets are masked the way Ironic does."""

from datetime import datetime
from typing import Any

from inspection.common.url_credentials import mask_url_passwords
from inspection.db.models import Node, Port
from inspection.rules.masking import is_secret_key

MASK = "******"
# Columns shown in a node list without ?detail=true (as Ironic's brief list).
BRIEF_NODE_FIELDS = ("uuid", "name", "driver", "provision_state", "maintenance",
                     "auto_discovered")
NODE_FIELDS = ("uuid", "name", "driver", "driver_info", "driver_internal_info", "properties",
               "extra", "instance_info", "provision_state", "target_provision_state",
               "inspect_interface", "reservation", "last_error", "maintenance",
               "inspection_started_at", "inspection_finished_at", "conductor_group",
               "resource_class", "auto_discovered", "created_at", "updated_at")
_MASKED_FIELDS = ("driver_info", "driver_internal_info", "instance_info")


def mask_secrets(value: Any) -> Any:
    """A copy of ``value`` with the value of every secret-named key, and the password of
    every URL (``https://user:PASS@bmc/``), replaced by ``******``."""
    if isinstance(value, dict):
        return {key: (MASK if is_secret_key(key) and sub not in (None, "")
                      else mask_secrets(sub)) for key, sub in value.items()}
    if isinstance(value, list):
        return [mask_secrets(sub) for sub in value]
    if isinstance(value, str):
        return mask_url_passwords(value, MASK)
    return value


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def node_view(node: Node, detail: bool = True) -> dict:
    """A node as the API shows it."""
    fields = NODE_FIELDS if detail else BRIEF_NODE_FIELDS
    data = {name: _plain(getattr(node, name)) for name in fields}
    for name in _MASKED_FIELDS:
        if name in data:
            data[name] = mask_secrets(data[name] or {})
    if "maintenance" in data:
        data["maintenance"] = bool(data["maintenance"])
    if "auto_discovered" in data:
        data["auto_discovered"] = bool(data["auto_discovered"])
    return data


def port_view(port: Port, node_uuid: str | None) -> dict:
    """A port as the API shows it."""
    return {"uuid": port.uuid, "address": port.address, "node_uuid": node_uuid,
            "pxe_enabled": bool(port.pxe_enabled), "extra": port.extra or {},
            "local_link_connection": port.local_link_connection or {},
            "physical_network": port.physical_network,
            "created_at": _plain(port.created_at), "updated_at": _plain(port.updated_at)}
