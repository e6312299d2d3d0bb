"""cpu-capabilities: capabilities from CPU flags, per ``[inspector]cpu_capabilities``."""

import logging

from inspection.hooks import inventory as inv
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)


class CpuCapabilitiesHook(InspectionHook):
    """Set e.g. ``cpu_vt:true`` when the CPU has the vmx or svm flag."""

    name = "cpu-capabilities"

    def __call__(self, ctx: InspectionContext) -> None:
        """Set ``true`` for every configured capability whose flag the CPU has."""
        cpu = inv.section(ctx.inventory, "cpu", required=False) or {}
        flags = cpu.get("flags")
        if not flags:
            LOG.warning("No CPU flags in the inventory of node %s", ctx.node_ident)
            return
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise self.fail("inventory cpu.flags must be a list of strings")
        present = set(flags)
        found = {name: "true" for flag, name in self.conf.inspector.cpu_capabilities.items()
                 if flag in present}
        LOG.info("CPU capabilities of node %s: %s", ctx.node_ident, found or "none")
        if found:
            ctx.edit.update_capabilities(found)
