"""parse-lldp: decode raw LLDP TLVs into ``plugin_data['parsed_lldp'][interface]``.

TLVs come from ``plugin_data['lldp_raw'][name]`` or the inventory interface's ``lldp``. A
TLV that is not valid hex or cannot be decoded is logged as a warning and skipped.
"""

import logging

from inspection.hooks import inventory as inv
from inspection.hooks import lldp
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)
# Each LLDPDU belongs to one physical interface: more than this is not a real machine.
MAX_INTERFACES = 64


class ParseLLDPHook(InspectionHook):
    """Make LLDP data readable for rules and operators."""

    name = "parse-lldp"

    def __call__(self, ctx: InspectionContext) -> None:
        """Fill ``parsed_lldp`` for every interface that has LLDP data."""
        interfaces = inv.interfaces(ctx.inventory)
        if len(interfaces) > MAX_INTERFACES:
            LOG.warning("Node %s reports %d interfaces; parsing LLDP of the first %d only",
                        ctx.node_ident, len(interfaces), MAX_INTERFACES)
            interfaces = interfaces[:MAX_INTERFACES]
        parsed = {}
        for iface in interfaces:
            name = iface.get("name")
            if not isinstance(name, str) or not name:
                continue
            info = lldp.parse_interface(iface, ctx.plugin_data, ctx.node_ident)
            if info is None:
                continue
            if info.fields:
                parsed[name] = info.fields
        if parsed:
            existing = ctx.plugin_data.get("parsed_lldp")
            ctx.plugin_data["parsed_lldp"] = {**(existing if isinstance(existing, dict)
                                                 else {}), **parsed}
