"""local-link-connection: a port's ``local_link_connection`` from the switch's LLDP.

``switch_id`` is the chassis id when it is a MAC, ``port_id`` the port id, ``switch_info`` the
system name. Values already set on the port (e.g. by an operator) are kept. Only this node's
ports are considered, matched by normalised MAC.
"""

import logging

from inspection.common.untrusted import for_log
from inspection.hooks import inventory as inv
from inspection.hooks import lldp
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)


class LocalLinkConnectionHook(InspectionHook):
    """Record which switch port each NIC is cabled to."""

    name = "local-link-connection"
    dependencies = ("validate-interfaces",)

    def __call__(self, ctx: InspectionContext) -> None:
        """Update ``local_link_connection`` of every port with usable LLDP data."""
        all_ifaces = ctx.plugin_data.get("all_interfaces")
        if not isinstance(all_ifaces, dict):
            raise self.fail("plugin data has no all_interfaces: the validate-interfaces hook "
                            "must run first")
        for iface in inv.interfaces(ctx.inventory):
            name = iface.get("name")
            if name not in all_ifaces:
                continue
            port = ctx.edit.port_by_address(all_ifaces[name]["mac_address"])
            if port is None:
                LOG.debug("Node %s: no port for interface %s, skipping LLDP", ctx.node_ident,
                          for_log(name))
                continue
            info = lldp.parse_interface(iface, ctx.plugin_data, ctx.node_ident)
            if info is None:
                continue
            found = {}
            if info.chassis_id_is_mac:
                found["switch_id"] = info.fields["switch_chassis_id"]
            if "switch_port_id" in info.fields:
                found["port_id"] = info.fields["switch_port_id"]
            if "switch_system_name" in info.fields:
                found["switch_info"] = info.fields["switch_system_name"]
            current = port.local_link_connection or {}
            updates = {k: v for k, v in found.items() if not current.get(k)}
            if updates:
                LOG.info("Node %s, port %s: local link connection %s", ctx.node_ident,
                         port.address, for_log(updates))
                ctx.edit.update_port_dict(port, "local_link_connection", updates)
