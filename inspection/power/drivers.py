"""Hardware types and their BMC clients; Ironic's power states and boot devices.

A node's boot is *managed* when its hardware type is ``redfish`` or ``ipmi`` and its
driver_info names the BMC's address; every other node (``fake-hardware``,
``manual-management``, a discovered node) is inspected as before: someone else powers it on.
"""

from collections.abc import Mapping
from typing import Protocol
from urllib.parse import urlsplit

from inspection.common.capabilities import parse_capabilities
from inspection.power.errors import BmcError

POWER_ON, POWER_OFF = "power on", "power off"
REBOOT, SOFT_REBOOT, SOFT_POWER_OFF = "rebooting", "soft rebooting", "soft power off"
#: Targets of ``PUT /v1/nodes/{node}/states/power`` (Ironic's).
POWER_TARGETS = (POWER_ON, POWER_OFF, REBOOT, SOFT_REBOOT, SOFT_POWER_OFF)
#: The power state each target ends in (Ironic's ``target_power_state``).
END_STATE = {POWER_ON: POWER_ON, REBOOT: POWER_ON, SOFT_REBOOT: POWER_ON,
             POWER_OFF: POWER_OFF, SOFT_POWER_OFF: POWER_OFF}

#: Boot devices for inspection: PXE, or UEFI HTTP boot (Ironic's ``uefihttp``).
PXE, UEFI_HTTP = "pxe", "uefihttp"
#: Boot interfaces of Ironic that boot the ramdisk over HTTP rather than PXE.
HTTP_BOOT_INTERFACES = ("http", "http-ipxe", "redfish-https")

#: driver_info keys each hardware type needs (Ironic's), the address first.
REQUIRED = {"redfish": ("redfish_address",),
            "ipmi": ("ipmi_address",)}


class BmcClient(Protocol):
    """One open session to a node's BMC."""

    def power_state(self) -> str:
        """``power on`` or ``power off``."""

    def set_power(self, target: str) -> None:
        """Request one of :data:`POWER_TARGETS` (returns once the BMC accepted it)."""

    def set_boot_once(self, device: str, boot_mode: str | None) -> None:
        """Boot once from ``device`` (:data:`PXE` or :data:`UEFI_HTTP`) at the next start."""

    def close(self) -> None:
        """End the session."""


def manages_boot(driver: str | None, driver_info: Mapping | None) -> bool:
    """Whether this service drives the node's BMC (power, boot device)."""
    keys = REQUIRED.get(driver or "")
    return bool(keys) and bool((driver_info or {}).get(keys[0]))


def bmc_key(driver: str | None, driver_info: Mapping | None) -> str:
    """What identifies the BMC a node's sessions go to (for per-BMC limits): its address,
    with the port where one is set."""
    keys = REQUIRED.get(driver or "")
    info = driver_info or {}
    address = str(info.get(keys[0]) or "") if keys else ""
    if driver == "redfish":
        url = address if "://" in address else f"https://{address}"
        try:
            return f"redfish:{urlsplit(url).netloc.lower()}"
        except ValueError:
            return f"redfish:{address}"
    return f"{driver}:{address}:{info.get('ipmi_port') or ''}"


def missing_info(driver: str | None, driver_info: Mapping | None) -> list[str]:
    """The driver_info keys the hardware type needs and the node lacks."""
    info = driver_info or {}
    return [key for key in REQUIRED.get(driver or "", ()) if not info.get(key)]


def boot_device(boot_interface: str | None) -> str:
    """The network boot device inspection uses for a node with ``boot_interface``."""
    return UEFI_HTTP if boot_interface in HTTP_BOOT_INTERFACES else PXE


def boot_mode(node_boot_mode: str | None, properties: Mapping | None) -> str | None:
    """``uefi`` or ``bios``: the node's ``boot_mode``, else its ``boot_mode`` capability (as
    Ironic reads it), else None (the BMC keeps its own)."""
    mode = node_boot_mode or parse_capabilities((properties or {}).get("capabilities")).get(
        "boot_mode")
    return mode if mode in ("uefi", "bios") else None


def open_client(driver: str | None, driver_info: Mapping | None, timeout: float) -> BmcClient:
    """A session to the node's BMC; :class:`BmcError` when it cannot be opened."""
    missing = missing_info(driver, driver_info)
    if driver not in REQUIRED:
        raise BmcError(f"hardware type {driver!r} has no BMC this service can drive",
                       retryable=False, kind="unsupported")
    if missing:
        raise BmcError(f"driver_info lacks {', '.join(missing)}", retryable=False,
                       kind="invalid")
    if driver == "redfish":
        from inspection.power.redfish import RedfishClient  # noqa: PLC0415 - loads sushy
        return RedfishClient(driver_info or {}, timeout)
    from inspection.power.ipmi import IpmiClient  # noqa: PLC0415 - loads pyghmi
    return IpmiClient(driver_info or {}, timeout)
