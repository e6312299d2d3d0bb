"""memory: ``properties.memory_mb`` from ``inventory.memory.physical_mb``."""

import logging

from inspection.hooks import inventory as inv
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)
_MIB = 1024 * 1024


class MemoryHook(InspectionHook):
    """Set the node's memory size in MiB."""

    name = "memory"

    def __call__(self, ctx: InspectionContext) -> None:
        """Use ``physical_mb``; without it fall back to ``total`` (bytes) with a warning."""
        memory = inv.section(ctx.inventory, "memory")
        if memory.get("physical_mb") not in (None, 0):
            memory_mb = inv.to_int(memory["physical_mb"], "inventory memory.physical_mb",
                                   minimum=1)
        elif memory.get("total") not in (None, 0):
            # Some VMs report no DMI memory devices, hence no physical_mb.
            total = inv.to_int(memory["total"], "inventory memory.total", minimum=1)
            memory_mb = -(-total // _MIB)
            LOG.warning("Node %s: inventory has no memory.physical_mb, using memory.total "
                        "(%d MiB)", ctx.node_ident, memory_mb)
        else:
            raise self.fail("inventory has no memory size (memory.physical_mb or "
                            "memory.total)")
        LOG.info("Memory of node %s: %d MiB", ctx.node_ident, memory_mb)
        ctx.edit.set_property("memory_mb", memory_mb)
