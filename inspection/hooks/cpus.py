"""cpus: ``properties.cpus`` from ``inventory.cpu.count``."""

import logging

from inspection.hooks import inventory as inv
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)


class CpusHook(InspectionHook):
    """Set the node's CPU count (a missing count is only a warning, as in Ironic)."""

    name = "cpus"

    def __call__(self, ctx: InspectionContext) -> None:
        """Set ``cpus``; a present but malformed count fails the inspection."""
        cpu = inv.section(ctx.inventory, "cpu", required=False) or {}
        if cpu.get("count") in (None, 0):
            LOG.warning("No CPU count in the inventory of node %s", ctx.node_ident)
            return
        count = inv.to_int(cpu["count"], "inventory cpu.count", minimum=1)
        ctx.edit.set_property("cpus", count)
