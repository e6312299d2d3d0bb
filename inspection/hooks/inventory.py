"""Checked access to the parts of an IPA inventory that hooks read.

The inventory comes from the ramdisk, so nothing in it is trusted: a missing required field or
a field of the wrong type raises :class:`InvalidInventoryError` with a message naming the
field; a malformed single item of a list (one interface, one disk, one PCI device) is skipped
with a warning so one odd device does not fail the whole inspection.
"""

import ipaddress
import logging
from typing import Any

from inspection.hooks.base import InvalidInventoryError

LOG = logging.getLogger(__name__)


def section(inventory: Any, key: str, required: bool = True) -> dict | None:
    """``inventory[key]`` as a dict; None if absent and not required."""
    if not isinstance(inventory, dict):
        raise InvalidInventoryError(f"inventory must be a JSON object, got "
                                    f"{type(inventory).__name__}")
    value = inventory.get(key)
    if value is None:
        if required:
            raise InvalidInventoryError(f"inventory has no {key!r} section")
        return None
    if not isinstance(value, dict):
        raise InvalidInventoryError(f"inventory field {key!r} must be an object, got "
                                    f"{type(value).__name__}")
    return value


def item_list(container: Any, key: str, where: str, required: bool = False) -> list[dict] | None:
    """``container[key]`` as a list of dicts (non-dict items skipped with a warning)."""
    if not isinstance(container, dict):
        raise InvalidInventoryError(f"{where} must be a JSON object, got "
                                    f"{type(container).__name__}")
    value = container.get(key)
    if value is None:
        if required:
            raise InvalidInventoryError(f"{where} has no {key!r} list")
        return None
    if not isinstance(value, list):
        raise InvalidInventoryError(f"{where} field {key!r} must be a list, got "
                                    f"{type(value).__name__}")
    items = []
    for index, item in enumerate(value):
        if isinstance(item, dict):
            items.append(item)
        else:
            LOG.warning("Ignoring malformed item %d of %s %r: %.100r", index, where, key, item)
    return items


def interfaces(inventory: Any) -> list[dict]:
    """The inventory's network interfaces (required)."""
    return item_list(inventory, "interfaces", "inventory", required=True) or []


def disks(inventory: Any) -> list[dict] | None:
    """The inventory's disks, or None if the ramdisk sent none."""
    return item_list(inventory, "disks", "inventory")


def to_int(value: Any, field: str, minimum: int | None = None) -> int:
    """An integer field (ints, integral floats and digit strings accepted)."""
    if isinstance(value, bool):
        raise InvalidInventoryError(f"{field} must be an integer, got a boolean")
    try:
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(value)
            number = int(value)
        elif isinstance(value, int | str):
            number = int(value)
        else:
            raise TypeError(value)
    except (TypeError, ValueError):
        raise InvalidInventoryError(f"{field} must be an integer, got {value!r:.60}") from None
    if minimum is not None and number < minimum:
        raise InvalidInventoryError(f"{field} must be at least {minimum}, got {number}")
    return number


def ip_address(value: Any, field: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Parse an optional IP address; an IPv6 zone (``fe80::1%eth0``) is dropped.

    A malformed value is logged and treated as absent: addresses only decide which interfaces
    count as active, and one odd address should not fail the inspection.
    """
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        LOG.warning("Ignoring malformed %s %.60r", field, value)
        return None
    try:
        return ipaddress.ip_address(value.split("%", 1)[0].strip())
    except ValueError:
        LOG.warning("Ignoring malformed %s %.60r", field, value)
        return None


def pci_devices(inventory: Any, plugin_data: dict) -> list[dict] | None:
    """PCI devices from plugin_data (IPA) or the inventory (Redfish), or None if neither has any.

    Each returned device has lower-case ``vendor_id``/``product_id`` without a ``0x`` prefix;
    devices without them are skipped with a warning.
    """
    devices = item_list(plugin_data, "pci_devices", "plugin data")
    if not devices:
        devices = item_list(inventory, "pci_devices", "inventory")
    if not devices:
        return None
    result = []
    for device in devices:
        vendor, product = hex_id(device.get("vendor_id")), hex_id(device.get("product_id"))
        if vendor is None or product is None:
            LOG.warning("Ignoring PCI device without valid vendor_id/product_id: %.200r", device)
            continue
        result.append(dict(device, vendor_id=vendor, product_id=product))
    return result


def hex_id(value: Any) -> str | None:
    """A PCI vendor/device id as 4 lower-case hex digits, or None if it is not one."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    text = text.removeprefix("0x")
    if not text or len(text) > 4 or any(c not in "0123456789abcdef" for c in text):
        return None
    return text.rjust(4, "0")
