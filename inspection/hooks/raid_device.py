"""raid-device: the one disk that is new since the previous inspection becomes the root device.

Run inspection once before creating a RAID volume and once after: if exactly one disk serial
appears that was not in the previously stored inventory, ``properties.root_device`` becomes
``{"serial": ...}``. Nothing changes when the root device is already set, when there is no
previous inventory, or when zero or several new disks appear.
"""

import logging
from typing import Any

from inspection.common.untrusted import for_log
from inspection.hooks import inventory as inv
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)


def _serials(inventory: Any) -> list[str]:
    disks = inv.disks(inventory) or []
    return [d["serial"] for d in disks if isinstance(d.get("serial"), str) and d["serial"]]


class RaidDeviceHook(InspectionHook):
    """Learn the root device hint from a RAID volume created between two inspections."""

    name = "raid-device"

    def __call__(self, ctx: InspectionContext) -> None:
        """Set ``root_device`` to the serial of the single new disk, if there is one."""
        if "root_device" in (ctx.node.properties or {}):
            LOG.info("Root device of node %s is already known", ctx.node_ident)
            return
        current = _serials(ctx.inventory)
        if not current:
            LOG.warning("No disk serials in the inventory of node %s", ctx.node_ident)
            return
        if not isinstance(ctx.previous_inventory, dict):
            LOG.debug("No previous inventory of node %s to compare disks with",
                      ctx.node_ident)
            return
        try:
            previous = set(_serials(ctx.previous_inventory))
        except Exception:  # the stored inventory is not this run's input: never fail on it
            LOG.warning("Previous inventory of node %s has malformed disks", ctx.node_ident)
            return
        new = [serial for serial in dict.fromkeys(current) if serial not in previous]
        if len(new) != 1:
            LOG.warning("Node %s: %d new disks since the previous inspection; root device "
                        "not set", ctx.node_ident, len(new))
            return
        LOG.info("Node %s: new disk %s becomes the root device", ctx.node_ident,
                 for_log(new[0]))
        ctx.edit.set_property("root_device", {"serial": new[0]})
