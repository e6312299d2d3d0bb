"""architecture: ``properties.cpu_arch`` from ``inventory.cpu.architecture``."""

import logging

from inspection.common.untrusted import for_log
from inspection.hooks import inventory as inv
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)


class ArchitectureHook(InspectionHook):
    """Set the node's CPU architecture (required in the inventory)."""

    name = "architecture"

    def __call__(self, ctx: InspectionContext) -> None:
        """Set ``cpu_arch``; a missing or non-string architecture fails the inspection."""
        cpu = inv.section(ctx.inventory, "cpu")
        arch = cpu.get("architecture")
        if not isinstance(arch, str) or not arch.strip():
            raise self.fail(f"inventory has a missing or malformed CPU architecture: "
                            f"{arch!r:.60}")
        LOG.info("CPU architecture of node %s: %s", ctx.node_ident, for_log(arch.strip()))
        ctx.edit.set_property("cpu_arch", arch.strip())
