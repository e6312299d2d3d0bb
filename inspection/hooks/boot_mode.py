"""boot-mode: the ``boot_mode`` capability from ``inventory.boot.current_boot_mode``."""

import logging
import re

from inspection.hooks import inventory as inv
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)
_MODE = re.compile(r"[A-Za-z0-9_.-]{1,32}")


class BootModeHook(InspectionHook):
    """Record the boot mode (bios/uefi) the ramdisk ran in as a capability."""

    name = "boot-mode"

    def __call__(self, ctx: InspectionContext) -> None:
        """Set ``boot_mode`` in the capabilities string, in place."""
        boot = inv.section(ctx.inventory, "boot", required=False) or {}
        mode = boot.get("current_boot_mode")
        if mode is None:
            LOG.warning("No boot mode in the inventory of node %s", ctx.node_ident)
            return
        if not isinstance(mode, str) or not _MODE.fullmatch(mode):
            raise self.fail(f"inventory boot.current_boot_mode is malformed: {mode!r:.60}")
        LOG.info("Boot mode of node %s: %s", ctx.node_ident, mode)
        ctx.edit.update_capabilities({"boot_mode": mode.lower()})
