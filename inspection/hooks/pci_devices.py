"""pci-devices: count PCI devices named by ``[inspector]pci_device_alias`` into capabilities.

Each alias is a JSON object ``{"vendor_id": "8086", "product_id": "154d", "name": "nic_x"}``
(validated at start). With PCI data present, every alias gets its current count (``nic_x:2``)
and aliases with no device are removed, so a removed card does not linger in scheduling.
"""

import json
import logging
from collections import Counter

from oslo_config import cfg

from inspection.hooks import inventory as inv
from inspection.hooks.base import HookConfigError, InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)


def parse_aliases(entries: list[str]) -> dict[tuple[str, str], str]:
    """Parse ``pci_device_alias`` entries into {(vendor_id, product_id): name}."""
    aliases: dict[tuple[str, str], str] = {}
    for entry in entries:
        try:
            parsed = json.loads(entry)
        except ValueError as exc:
            raise HookConfigError(f"[inspector]pci_device_alias entry {entry!r} is not "
                                  f"JSON: {exc}") from None
        if not isinstance(parsed, dict) or set(parsed) != {"vendor_id", "product_id", "name"}:
            raise HookConfigError(f"[inspector]pci_device_alias entry {entry!r} must have "
                                  f"exactly the keys vendor_id, product_id and name")
        vendor, product = inv.hex_id(parsed["vendor_id"]), inv.hex_id(parsed["product_id"])
        name = parsed["name"]
        if vendor is None or product is None:
            raise HookConfigError(f"[inspector]pci_device_alias entry {entry!r}: vendor_id "
                                  f"and product_id must be 4 hex digits")
        if not isinstance(name, str) or not name or any(c in name for c in ",:"):
            raise HookConfigError(f"[inspector]pci_device_alias entry {entry!r}: name must "
                                  f"be a non-empty string without ',' or ':'")
        aliases[(vendor, product)] = name
    return aliases


class PciDevicesHook(InspectionHook):
    """Set capabilities counting configured PCI devices (for Nova scheduling)."""

    name = "pci-devices"

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        self.aliases = parse_aliases(list(conf.inspector.pci_device_alias))

    def __call__(self, ctx: InspectionContext) -> None:
        """Update one capability per alias with the number of matching devices."""
        if not self.aliases:
            return
        devices = inv.pci_devices(ctx.inventory, ctx.plugin_data)
        if devices is None:
            LOG.warning("No PCI device information for node %s: PCI capabilities unchanged",
                        ctx.node_ident)
            return
        counts = Counter(self.aliases[key] for key in
                         ((d["vendor_id"], d["product_id"]) for d in devices)
                         if key in self.aliases)
        missing = tuple(name for name in self.aliases.values() if name not in counts)
        LOG.info("PCI devices of node %s: %s", ctx.node_ident, dict(counts) or "none")
        ctx.edit.update_capabilities(dict(counts), remove=missing)
