"""ports: create ports for the validated interfaces and prune or update existing ones.

- ``[inspector]add_ports`` (all/active/pxe, applied by validate-interfaces; ``disabled`` adds
  none): a port per valid interface, with ``pxe_enabled`` and ``extra['client-id']``
  (InfiniBand). A MAC that is already a port of another node is left alone with a warning:
  the unique address would otherwise fail the whole commit.
- ``[inspector]keep_ports``: ``all`` deletes nothing, ``present`` deletes ports whose MAC is
  not in the inventory, ``added`` deletes ports whose MAC is not a valid interface.
- ``[inspector]update_pxe_enabled``: existing ports get ``pxe_enabled`` from the inventory
  (only when the inventory says which interface PXE booted).

Each ``valid_interfaces`` entry gets ``is_added``: true if this run created its port.
"""

import logging

from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext
from inspection.hooks.validate_interfaces import pxe_mac
from inspection.node_edit import port_mac

LOG = logging.getLogger(__name__)


class PortsHook(InspectionHook):
    """Create, delete and update the node's ports to match the inventory."""

    name = "ports"
    dependencies = ("validate-interfaces",)

    def __call__(self, ctx: InspectionContext) -> None:
        """Apply add_ports, keep_ports and update_pxe_enabled."""
        valid = ctx.plugin_data.get("valid_interfaces")
        all_ifaces = ctx.plugin_data.get("all_interfaces")
        if not isinstance(valid, dict) or not isinstance(all_ifaces, dict):
            raise self.fail("plugin data has no valid_interfaces/all_interfaces: the "
                            "validate-interfaces hook must run first")
        for iface in valid.values():
            iface["is_added"] = False
        if self.conf.inspector.add_ports != "disabled":
            self._add_ports(ctx, valid)
        self._prune_and_update(ctx, valid, all_ifaces)

    def _add_ports(self, ctx: InspectionContext, valid: dict) -> None:
        for iface in valid.values():
            mac = iface["mac_address"]
            owner = ctx.edit.port_owner(mac)
            if owner is ctx.node:
                LOG.debug("Node %s already has a port for %s", ctx.node_ident, mac)
                continue
            if owner is not None:
                LOG.warning("Not creating a port for %s on node %s: it is already a port of "
                            "node %s", mac, ctx.node_ident, owner.uuid)
                continue
            extra = {"client-id": iface["client_id"]} if iface.get("client_id") else {}
            ctx.edit.create_port(mac, pxe_enabled=iface["pxe_enabled"], extra=extra)
            iface["is_added"] = True
            LOG.info("Port created for MAC %s of node %s%s", mac, ctx.node_ident,
                     " (PXE booting)" if iface["pxe_enabled"] else "")

    def _prune_and_update(self, ctx: InspectionContext, valid: dict, all_ifaces: dict) -> None:
        keep = self.conf.inspector.keep_ports
        if keep == "present":
            expected = {i["mac_address"] for i in all_ifaces.values()}
        elif keep == "added":
            expected = {i["mac_address"] for i in valid.values()}
        else:
            expected = None
        pxe_known = pxe_mac(ctx.inventory) is not None
        pxe_macs = {i["mac_address"] for i in all_ifaces.values() if i.get("pxe_enabled")}
        client_ids = {i["mac_address"]: i.get("client_id") for i in all_ifaces.values()}

        for port in list(ctx.edit.ports):
            mac = port_mac(port) or port.address
            # An empty expectation would delete every port: never act on it.
            if expected and mac not in expected:
                LOG.info("Deleting port %s (%s) of node %s: not among the expected MACs "
                         "(keep_ports=%s)", port.uuid, port.address, ctx.node_ident, keep)
                ctx.edit.delete_port(port)
                continue
            if self.conf.inspector.update_pxe_enabled and pxe_known:
                wanted = mac in pxe_macs
                if bool(port.pxe_enabled) != wanted:
                    LOG.debug("Setting pxe_enabled=%s on port %s of node %s", wanted,
                              port.address, ctx.node_ident)
                    port.pxe_enabled = wanted
            client_id = client_ids.get(mac)
            if client_id and (port.extra or {}).get("client-id") != client_id:
                ctx.edit.update_port_dict(port, "extra", {"client-id": client_id})
