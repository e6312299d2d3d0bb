"""accelerators: ``properties.accelerators`` from PCI devices listed as known accelerators.

The list comes from the YAML file ``[inspector]known_accelerators`` (the packaged
``data/known_accelerators.yaml`` when unset; ``etc/ironic-inspection/known-accelerators.yaml``
is the same list for operators to copy and edit). It is read and validated once, at start.
When PCI data exists and nothing matches, the property becomes an empty list; without PCI
data the property is left as it was.
"""

import logging
import os
from typing import Any

import yaml
from oslo_config import cfg

from inspection.hooks import inventory as inv
from inspection.hooks.base import HookConfigError, InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)
DEFAULT_FILE = os.path.join(os.path.dirname(__file__), "data", "known_accelerators.yaml")


def load_known_devices(path: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Read a known-accelerators YAML file into {(vendor_id, device_id): entry}."""
    try:
        with open(path, encoding="utf-8") as stream:
            data = yaml.safe_load(stream)
    except OSError as exc:
        raise HookConfigError(f"cannot read [inspector]known_accelerators file {path}: "
                              f"{exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise HookConfigError(f"[inspector]known_accelerators file {path} is not valid "
                              f"YAML: {exc}") from None
    devices = data.get("pci_devices") if isinstance(data, dict) else None
    if not isinstance(devices, list):
        raise HookConfigError(f"[inspector]known_accelerators file {path} must contain a "
                              f"'pci_devices' list")
    known: dict[tuple[str, str], dict[str, Any]] = {}
    for index, entry in enumerate(devices):
        vendor = inv.hex_id(str(entry.get("vendor_id"))) if isinstance(entry, dict) else None
        device = inv.hex_id(str(entry.get("device_id"))) if isinstance(entry, dict) else None
        if vendor is None or device is None:
            raise HookConfigError(f"entry {index} of [inspector]known_accelerators file "
                                  f"{path} needs vendor_id and device_id (4 hex digits)")
        known[(vendor, device)] = dict(entry, vendor_id=vendor, device_id=device)
    return known


class AcceleratorsHook(InspectionHook):
    """List the node's known accelerator devices (GPUs...) in its properties."""

    name = "accelerators"

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        self.known = load_known_devices(conf.inspector.known_accelerators or DEFAULT_FILE)

    def __call__(self, ctx: InspectionContext) -> None:
        """Set ``accelerators`` to the matching devices, each with its ``pci_address``."""
        devices = inv.pci_devices(ctx.inventory, ctx.plugin_data)
        if devices is None:
            LOG.warning("No PCI device information for node %s: accelerators unchanged",
                        ctx.node_ident)
            return
        found = []
        for device in devices:
            known = self.known.get((device["vendor_id"], device["product_id"]))
            if known is not None:
                found.append(dict(known, pci_address=device.get("bus")))
        LOG.info("Accelerators of node %s: %s", ctx.node_ident, found or "none")
        ctx.edit.set_property("accelerators", found)
