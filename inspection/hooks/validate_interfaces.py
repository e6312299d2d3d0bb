"""validate-interfaces: decide which inventory interfaces are usable and which one PXE booted.

Writes to plugin_data (the inventory itself is never changed):

- ``all_interfaces``: name -> interface copy for every interface with a name and a valid MAC
  (loopback excluded: ``lo``, loopback addresses, the all-zero MAC), with ``mac_address``
  normalised (lower-case colon form), ``ipv6_address`` without its zone and ``pxe_enabled``
  (true for the PXE interface; for every interface when the inventory does not say which one
  booted, so that no port loses PXE for lack of information);
- ``valid_interfaces``: the subset that gets ports per ``[inspector]add_ports``;
- ``macs``: the MACs of ``valid_interfaces``;
- out-of-band (an inventory read from the BMC: no IP addresses, no PXE interface),
  ``active`` means the BMC reports the link up (``has_carrier``) and ``pxe`` selects
  every interface, as Ironic does when the PXE interface is unknown;
- ``bmc_address`` / ``bmc_v6address``: the inventory's BMC addresses, normalised, when the
  ramdisk reported a usable one (not IPA's ``0.0.0.0`` / ``::/0``) and plugin_data has none
  yet, so that rules (e.g. the built-in discovery example) can read them from plugin_data.
"""

import logging
from typing import Any

from inspection import bmc
from inspection.common.untrusted import for_log
from inspection.hooks import inventory as inv
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext
from inspection.power.tasks import out_of_band
from pxe_filter.common.macs import InvalidMAC, normalize_mac

LOG = logging.getLogger(__name__)


def pxe_mac(inventory: Any) -> str | None:
    """The normalised MAC of the interface the node PXE booted from, or None if unknown.

    ``boot.pxe_interface`` is a MAC, or pxelinux's ``01-aa-bb-cc-dd-ee-ff`` (hardware type 01
    then the MAC with dashes).
    """
    boot = inv.section(inventory, "boot", required=False) or {}
    value = boot.get("pxe_interface")
    if not value:
        return None
    if isinstance(value, str) and value.count("-") == 6 and value.startswith("01-"):
        value = value[3:]
    try:
        return normalize_mac(value)
    except InvalidMAC:
        LOG.warning("Ignoring malformed boot.pxe_interface %.60r in the inventory", value)
        return None


def _all_interfaces(ctx: InspectionContext, pxe: str | None) -> dict[str, dict]:
    result: dict[str, dict] = {}
    for iface in inv.interfaces(ctx.inventory):
        name = iface.get("name")
        if not isinstance(name, str) or not name:
            LOG.warning("Node %s: ignoring interface record without a name: %.200r",
                        ctx.node_ident, iface)
            continue
        if not iface.get("mac_address"):
            LOG.debug("Node %s: skipping interface %s without a MAC", ctx.node_ident,
                      for_log(name))
            continue
        try:
            mac = normalize_mac(iface["mac_address"])
        except InvalidMAC as exc:
            LOG.warning("Node %s: skipping interface %s: %s", ctx.node_ident, for_log(name),
                        for_log(str(exc)))
            continue
        if mac == "00:00:00:00:00:00":
            LOG.debug("Node %s: skipping interface %s with an all-zero MAC", ctx.node_ident,
                      for_log(name))
            continue
        if name == "lo" or _has_ip(iface)[1]:
            LOG.debug("Node %s: skipping loopback interface %s", ctx.node_ident, for_log(name))
            continue
        if name in result:
            LOG.warning("Node %s: interface name %s appears twice; keeping the first",
                        ctx.node_ident, for_log(name))
            continue
        ipv6 = iface.get("ipv6_address")
        if isinstance(ipv6, str) and "%" in ipv6:
            ipv6 = ipv6.split("%", 1)[0]
        result[name] = dict(iface, mac_address=mac, ipv6_address=ipv6,
                            pxe_enabled=(pxe is None or mac == pxe))
    return result


def _has_ip(iface: dict) -> tuple[bool, bool]:
    """(has an address, has a loopback address)."""
    addresses = [inv.ip_address(iface.get("ipv4_address"), "ipv4_address"),
                 inv.ip_address(iface.get("ipv6_address"), "ipv6_address")]
    addresses = [a for a in addresses if a is not None]
    return bool(addresses), any(a.is_loopback for a in addresses)


def _no_valid_interface(mode: str, pxe: str | None, all_ifaces: dict[str, dict],
                        oob: bool = False) -> str:
    """Why ``[inspector]add_ports`` selected no interface, and what to change."""
    names = ", ".join(sorted(all_ifaces))
    if oob:
        why = f"the BMC reports no link up on any of the interfaces ({names})"
    elif mode == "pxe" and pxe is not None:
        why = (f"the PXE interface {pxe} (boot.pxe_interface) is not among the usable "
               f"interfaces ({names})")
    elif mode == "pxe":
        why = (f"the inventory does not say which interface PXE booted "
               f"(boot.pxe_interface), and none of the interfaces ({names}) has an IP "
               f"address to fall back on")
    else:
        why = f"none of the interfaces ({names}) has an IP address"
    return (f"no network interface to add ports for with [inspector]add_ports={mode}: {why}; "
            f"set [inspector]add_ports=all to add every interface")


class ValidateInterfacesHook(InspectionHook):
    """Validate the inventory's interfaces and record them in plugin_data."""

    name = "validate-interfaces"

    def preprocess(self, ctx: InspectionContext) -> None:
        """Fill ``all_interfaces``, ``valid_interfaces`` and ``macs``."""
        mode = self.conf.inspector.add_ports
        pxe = pxe_mac(ctx.inventory)
        all_ifaces = _all_interfaces(ctx, pxe)
        if not all_ifaces:
            raise self.fail("no usable network interface in the inventory (loopback interfaces "
                            "and interfaces without a name or a valid MAC are ignored)")
        oob = out_of_band(ctx.node)
        if pxe is None and mode == "pxe" and not oob:
            LOG.warning("Node %s: the inventory does not say which interface PXE booted "
                        "(boot.pxe_interface); [inspector]add_ports=pxe falls back to the "
                        "interfaces with an IP address", ctx.node_ident)
        valid: dict[str, dict] = {}
        for name, iface in all_ifaces.items():
            active = iface.get("has_carrier") is True if oob else _has_ip(iface)[0]
            if mode == "pxe" and pxe is not None and iface["mac_address"] != pxe:
                continue
            if (mode == "active" or (mode == "pxe" and pxe is None and not oob)) \
                    and not active:
                continue
            valid[name] = dict(iface)
        if not valid:
            raise self.fail(_no_valid_interface(mode, pxe, all_ifaces, oob))
        ctx.plugin_data["all_interfaces"] = all_ifaces
        ctx.plugin_data["valid_interfaces"] = valid
        ctx.plugin_data["macs"] = [iface["mac_address"] for iface in valid.values()]
        for key in ("bmc_address", "bmc_v6address"):
            reported = bmc.reported_addresses(ctx.inventory.get(key))
            if reported and not ctx.plugin_data.get(key):
                ctx.plugin_data[key] = reported[0]

    def __call__(self, ctx: InspectionContext) -> None:
        """Nothing to do: validation ran in preprocess."""
