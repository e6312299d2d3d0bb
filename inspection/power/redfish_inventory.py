"""Out-of-band inventory: what a Redfish BMC says about its system, in the shape IPA sends.

Only what the BMC states is mapped; what Redfish cannot say (IP addresses, the interface that
PXE boots, CPU flags, the OS-visible memory) stays absent. Sizes and counts that the BMC
reports in another unit are converted, never estimated. docs/bmc.md has the field mapping.
BMC documents are untrusted: :mod:`.redfish_resources` type-checks and bounds what is read.
"""

import ipaddress
import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from inspection.power.redfish_devices import pci_devices, storage
from inspection.power.redfish_resources import (
    MAX_MEMBERS,
    Getter,
    Walker,
    integer,
    present,
    put,
    text,
)
from pxe_filter.common.macs import InvalidMAC, normalize_mac

LOG = logging.getLogger(__name__)

#: Redfish InstructionSet -> the architecture name IPA reports (as Ironic maps it).
ARCHITECTURES = {"x86-64": "x86_64", "x86": "i686", "ARM-A64": "aarch64", "ARM-A32": "arm",
                 "IA-64": "ia64", "MIPS32": "mips", "MIPS64": "mips64"}
#: Redfish BootSourceOverrideMode -> IPA's current_boot_mode.
BOOT_MODES = {"UEFI": "uefi", "Legacy": "bios"}
_CARRIER = {"LinkUp": True, "Up": True, "LinkDown": False, "Down": False, "NoLink": False}


@dataclass
class Reading:
    """An inventory read from a BMC, the plugin data beside it, and Ironic's ``local_gb``."""

    inventory: dict
    plugin_data: dict = field(default_factory=dict)
    local_gb: int = 0


def read_inventory(get: Getter, system: dict, address: str) -> Reading:
    """The inventory of ``system`` (its JSON) from the BMC at ``address`` (redfish_address)."""
    walk = Walker(get)
    inventory: dict[str, Any] = {}
    plugin_data: dict[str, Any] = {}
    put(inventory, "system_vendor", _system_vendor(system))
    mode = BOOT_MODES.get(text((system.get("Boot") or {}).get("BootSourceOverrideMode")) or "")
    if mode:
        inventory["boot"] = {"current_boot_mode": mode}
    put(inventory, "cpu", _cpu(walk, system))
    memory, modules = _memory(walk, system)
    put(inventory, "memory", memory)
    put(plugin_data, "memory_modules", modules)
    managers = list(walk.docs((system.get("Links") or {}).get("ManagedBy")))
    bmc_nics = [n for m in managers for n in walk.docs(m.get("EthernetInterfaces"))]
    _bmc(inventory, bmc_nics, address)
    bmc_macs = {mac for mac in map(_mac, bmc_nics) if mac}
    adapters = _network_adapters(walk, system)
    inventory["interfaces"] = _interfaces(walk, system, bmc_macs, adapters)
    put(plugin_data, "network_adapters", [a["info"] for a in adapters])
    put(plugin_data, "parsed_lldp", _lldp(inventory["interfaces"], adapters))
    disks, controllers, local_gb = storage(walk, system)
    put(inventory, "disks", disks)
    put(inventory, "storage_controllers", controllers)
    put(inventory, "pci_devices", pci_devices(walk, system))
    put(plugin_data, "redfish_missing_resources", walk.missing[:MAX_MEMBERS])
    return Reading(inventory, plugin_data, local_gb)


def _system_vendor(system: dict) -> dict:
    vendor: dict[str, Any] = {}
    for key, source in (("manufacturer", "Manufacturer"), ("product_name", "Model"),
                        ("serial_number", "SerialNumber"), ("sku", "SKU"),
                        ("system_uuid", "UUID")):
        put(vendor, key, text(system.get(source)))
    bios = text(system.get("BiosVersion"))
    if bios:
        vendor["firmware"] = {"version": bios}
    return vendor


def _cpu(walk: Walker, system: dict) -> dict:
    cpu: dict[str, Any] = {}
    procs = [p for p in walk.docs(system.get("Processors"))
             if p.get("ProcessorType") in (None, "CPU") and present(p)]
    if procs:
        threads = [integer(p.get("TotalThreads")) for p in procs]
        cores = [integer(p.get("TotalCores")) for p in procs]
        # IPA's count is the logical CPUs; without thread counts the cores are the best
        # the BMC says (never sockets times a guess).
        if all(t for t in threads):
            cpu["count"] = sum(threads)
        elif all(c for c in cores):
            cpu["count"] = sum(cores)
        if all(c for c in cores):
            cpu["cores"] = sum(cores)
        cpu["socket_count"] = len(procs)
        first = procs[0]
        put(cpu, "model_name", text(first.get("Model")))
        speed = integer(first.get("MaxSpeedMHz"))
        if speed:
            cpu["frequency"] = str(speed)
        put(cpu, "architecture", ARCHITECTURES.get(text(first.get("InstructionSet")) or ""))
        return cpu
    summary = system.get("ProcessorSummary")
    if isinstance(summary, dict):
        put(cpu, "count", integer(summary.get("LogicalProcessorCount")) or None)
        put(cpu, "cores", integer(summary.get("CoreCount")) or None)
        put(cpu, "socket_count", integer(summary.get("Count")) or None)
        put(cpu, "model_name", text(summary.get("Model")))
    return cpu


def _memory(walk: Walker, system: dict) -> tuple[dict, list[dict]]:
    modules = []
    for dimm in walk.docs(system.get("Memory")):
        if not present(dimm) or not integer(dimm.get("CapacityMiB")):
            continue
        module: dict[str, Any] = {"name": text(dimm.get("Id")),
                                  "size_mb": dimm["CapacityMiB"]}
        for key, source in (("locator", "DeviceLocator"), ("type", "MemoryDeviceType"),
                            ("manufacturer", "Manufacturer"), ("part_number", "PartNumber"),
                            ("serial_number", "SerialNumber")):
            put(module, key, text(dimm.get(source)))
        put(module, "speed_mhz", integer(dimm.get("OperatingSpeedMhz")))
        modules.append(module)
    summary = system.get("MemorySummary")
    total = summary.get("TotalSystemMemoryGiB") if isinstance(summary, dict) else None
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
        return {"physical_mb": int(total * 1024)}, modules
    if modules:
        return {"physical_mb": sum(m["size_mb"] for m in modules)}, modules
    return {}, modules


def _mac(nic: dict) -> str | None:
    for key in ("MACAddress", "PermanentMACAddress"):
        try:
            mac = normalize_mac(nic.get(key))
        except InvalidMAC:
            continue
        if mac != "00:00:00:00:00:00":
            return mac
    return None


def _bmc(inventory: dict, nics: list[dict], address: str) -> None:
    """``bmc_address``, ``bmc_v6address`` and ``bmc_mac`` from the managers' NICs."""
    for nic in nics:
        for entry in nic.get("IPv4Addresses") or []:
            ip = _ip(entry)
            if ip and ip.version == 4 and not ip.is_unspecified:
                inventory.setdefault("bmc_address", str(ip))
        for entry in nic.get("IPv6Addresses") or []:
            ip = _ip(entry)
            if ip and ip.version == 6 and not (ip.is_link_local or ip.is_unspecified):
                inventory.setdefault("bmc_v6address", str(ip))
        mac = _mac(nic)
        if mac:
            inventory.setdefault("bmc_mac", mac)
    if "bmc_address" not in inventory and "bmc_v6address" not in inventory:
        # The address this service reached the BMC at, when it is an IP.
        host = urlsplit(address).hostname or ""
        ip = _ip({"Address": host})
        if ip is not None:
            inventory["bmc_address" if ip.version == 4 else "bmc_v6address"] = str(ip)


def _ip(entry: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = entry.get("Address") if isinstance(entry, dict) else None
    try:
        return ipaddress.ip_address(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _network_adapters(walk: Walker, system: dict) -> list[dict]:
    """The system's chassis' network adapters: what plugin data shows, and port details."""
    adapters = []
    for chassis in walk.docs((system.get("Links") or {}).get("Chassis")):
        for adapter in walk.docs(chassis.get("NetworkAdapters")):
            info: dict[str, Any] = {"id": text(adapter.get("Id"))}
            for key, source in (("manufacturer", "Manufacturer"), ("model", "Model"),
                                ("serial_number", "SerialNumber"),
                                ("part_number", "PartNumber")):
                put(info, key, text(adapter.get(source)))
            ports = []
            for port in walk.docs(adapter.get("Ports") or adapter.get("NetworkPorts")):
                ethernet = port.get("Ethernet") if isinstance(port.get("Ethernet"), dict) \
                    else {}
                macs = ethernet.get("AssociatedMACAddresses") or port.get(
                    "AssociatedNetworkAddresses") or []
                speed = _speed(port)
                entry: dict[str, Any] = {"id": text(port.get("Id"))}
                put(entry, "link_status", text(port.get("LinkStatus")))
                put(entry, "speed_mbps", speed)
                put(entry, "mac_addresses", sorted({m for m in map(_normal_mac, macs) if m}))
                lldp = ethernet.get("LLDPReceive")
                ports.append((entry, lldp if isinstance(lldp, dict) else None))
            info["ports"] = [entry for entry, _ in ports]
            adapters.append({"info": info, "ports": ports})
    return adapters


def _speed(port: dict) -> int | None:
    gbps = port.get("CurrentSpeedGbps")
    if isinstance(gbps, (int, float)) and not isinstance(gbps, bool) and gbps > 0:
        return int(gbps * 1000)
    return integer(port.get("CurrentLinkSpeedMbps"))


def _normal_mac(value: Any) -> str | None:
    try:
        return normalize_mac(value)
    except InvalidMAC:
        return None


def _port_of(mac: str, adapters: list[dict]) -> tuple[dict, dict | None] | None:
    for adapter in adapters:
        for entry, lldp in adapter["ports"]:
            if mac in entry.get("mac_addresses", ()):
                return entry, lldp
    return None


def _interfaces(walk: Walker, system: dict, bmc_macs: set[str],
                adapters: list[dict]) -> list[dict]:
    interfaces = []
    for nic in walk.docs(system.get("EthernetInterfaces")):
        name = text(nic.get("Id"))
        mac = _mac(nic)
        if not name or not mac or not present(nic):
            LOG.info("Redfish interface %.60r skipped: no valid MAC, or absent", name)
            continue
        if mac in bmc_macs:
            LOG.info("Redfish interface %s (%s) is the BMC's own NIC: no port for it", name, mac)
            continue
        iface: dict[str, Any] = {"name": name, "mac_address": mac}
        port = _port_of(mac, adapters)
        speed = integer(nic.get("SpeedMbps"))
        put(iface, "speed_mbps", speed if speed else (port[0].get("speed_mbps")
                                                        if port else None))
        carrier = _CARRIER.get(text(nic.get("LinkStatus")) or "")
        if carrier is None and port:
            carrier = _CARRIER.get(port[0].get("link_status") or "")
        put(iface, "has_carrier", carrier)
        interfaces.append(iface)
    return interfaces


def _lldp(interfaces: list[dict], adapters: list[dict]) -> dict:
    """Ironic's ``parsed_lldp``: by interface name when a port carries the interface's MAC,
    else by port id (as Ironic keys it)."""
    names = {i["mac_address"]: i["name"] for i in interfaces}
    parsed: dict[str, dict] = {}
    for adapter in adapters:
        for entry, lldp in adapter["ports"]:
            if not lldp:
                continue
            fields: dict[str, Any] = {}
            for key, source in (("switch_chassis_id", "ChassisId"),
                                ("switch_port_id", "PortId"),
                                ("switch_system_name", "SystemName"),
                                ("switch_system_description", "SystemDescription")):
                put(fields, key, text(lldp.get(source)))
            put(fields, "switch_port_management_vlan_id", integer(lldp.get("ManagementVlanId")))
            addresses = [a for a in (text(lldp.get("ManagementAddressIPv4")),
                                     text(lldp.get("ManagementAddressIPv6"))) if a]
            put(fields, "switch_mgmt_addresses", addresses)
            key = next((names[m] for m in entry.get("mac_addresses", ()) if m in names),
                       entry.get("id"))
            if fields and key:
                parsed[key] = fields
    return parsed


