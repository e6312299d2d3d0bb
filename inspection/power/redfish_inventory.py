"""Out-of-band inventory: what a Redfish BMC says about its system, in the shape IPA sends.

Only what the BMC states is mapped; what Redfish cannot say (IP addresses, the interface that
PXE boots, CPU flags, the OS-visible memory) stays absent. Sizes and counts that the BMC
reports in another unit are converted, never estimated. docs/bmc.md has the field mapping.
BMC documents are untrusted: every value is type-checked, and collections are bounded.
"""

import ipaddress
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pxe_filter.common.macs import InvalidMAC, normalize_mac

LOG = logging.getLogger(__name__)

GIB = 1024 ** 3
#: Ironic's smallest root device (and IPA's): smaller disks and volumes never count.
MIN_ROOT_SIZE = 4 * GIB
#: Most members read from one collection: a BMC listing more is cut there (logged).
MAX_MEMBERS = 256

#: Redfish InstructionSet -> the architecture name IPA reports (as Ironic maps it).
ARCHITECTURES = {"x86-64": "x86_64", "x86": "i686", "ARM-A64": "aarch64", "ARM-A32": "arm",
                 "IA-64": "ia64", "MIPS32": "mips", "MIPS64": "mips64"}
#: Redfish BootSourceOverrideMode -> IPA's current_boot_mode.
BOOT_MODES = {"UEFI": "uefi", "Legacy": "bios"}
_CARRIER = {"LinkUp": True, "Up": True, "LinkDown": False, "Down": False, "NoLink": False}

#: Fetches one resource's JSON by its path; raises :class:`MissingResource` when the BMC has
#: no such resource, BmcError (naming the path) on any other failure.
Getter = Callable[[str], dict]


class MissingResource(Exception):
    """The BMC links to a resource it does not serve (HTTP 404 or 501)."""


@dataclass
class Reading:
    """An inventory read from a BMC, the plugin data beside it, and Ironic's ``local_gb``."""

    inventory: dict
    plugin_data: dict = field(default_factory=dict)
    local_gb: int = 0


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _hex_id(value: Any) -> str | None:
    """``0x8086`` -> ``8086`` (the form IPA reports PCI ids in)."""
    text = _text(value)
    if text is None:
        return None
    text = text.lower().removeprefix("0x")
    return text if text and all(c in "0123456789abcdef" for c in text) else None


def _state(doc: dict) -> str | None:
    status = doc.get("Status")
    return status.get("State") if isinstance(status, dict) else None


def _present(doc: dict) -> bool:
    return _state(doc) not in ("Absent", "Disabled", "UnavailableOffline")


def _link(value: Any) -> str | None:
    path = value.get("@odata.id") if isinstance(value, dict) else None
    return path.split("#", 1)[0] if isinstance(path, str) and path.startswith("/") else None


def _put(target: dict, key: str, value: Any) -> None:
    if value is not None and value not in ([], {}):
        target[key] = value


class _Walker:
    """Follows links of one BMC; every document is fetched once."""

    def __init__(self, get: Getter) -> None:
        self._get = get
        self._seen: dict[str, dict | None] = {}
        #: Linked resources the BMC does not serve: what they would say stays absent.
        self.missing: list[str] = []

    def doc(self, link: Any) -> dict | None:
        path = _link(link)
        if path is None:
            return None
        if path not in self._seen:
            try:
                body = self._get(path)
            except MissingResource:
                LOG.warning("The Redfish BMC links to %.200s but does not serve it (404 or "
                            "501): what it holds is absent from the inventory", path)
                self.missing.append(path)
                body = None
            self._seen[path] = body if isinstance(body, dict) or body is None else {}
        return self._seen[path]

    def docs(self, links: Any) -> Iterator[dict]:
        """The documents of a list of links, or of a collection's members."""
        if isinstance(links, dict):
            collection = self.doc(links) or {}
            links = collection.get("Members")
        if not isinstance(links, list):
            return
        if len(links) > MAX_MEMBERS:
            LOG.warning("A Redfish collection lists %d members; only the first %d are read",
                        len(links), MAX_MEMBERS)
        for link in links[:MAX_MEMBERS]:
            found = self.doc(link)
            if found is not None:
                yield found


def read_inventory(get: Getter, system: dict, address: str) -> Reading:
    """The inventory of ``system`` (its JSON) from the BMC at ``address`` (redfish_address)."""
    walk = _Walker(get)
    inventory: dict[str, Any] = {}
    plugin_data: dict[str, Any] = {}
    _put(inventory, "system_vendor", _system_vendor(system))
    mode = BOOT_MODES.get(_text((system.get("Boot") or {}).get("BootSourceOverrideMode")) or "")
    if mode:
        inventory["boot"] = {"current_boot_mode": mode}
    _put(inventory, "cpu", _cpu(walk, system))
    memory, modules = _memory(walk, system)
    _put(inventory, "memory", memory)
    _put(plugin_data, "memory_modules", modules)
    managers = list(walk.docs((system.get("Links") or {}).get("ManagedBy")))
    bmc_nics = [n for m in managers for n in walk.docs(m.get("EthernetInterfaces"))]
    _bmc(inventory, bmc_nics, address)
    bmc_macs = {mac for mac in map(_mac, bmc_nics) if mac}
    adapters = _network_adapters(walk, system)
    inventory["interfaces"] = _interfaces(walk, system, bmc_macs, adapters)
    _put(plugin_data, "network_adapters", [a["info"] for a in adapters])
    _put(plugin_data, "parsed_lldp", _lldp(inventory["interfaces"], adapters))
    disks, controllers, local_gb = _storage(walk, system)
    _put(inventory, "disks", disks)
    _put(inventory, "storage_controllers", controllers)
    _put(inventory, "pci_devices", _pci_devices(walk, system))
    _put(plugin_data, "redfish_missing_resources", walk.missing[:MAX_MEMBERS])
    return Reading(inventory, plugin_data, local_gb)


def _system_vendor(system: dict) -> dict:
    vendor: dict[str, Any] = {}
    for key, source in (("manufacturer", "Manufacturer"), ("product_name", "Model"),
                        ("serial_number", "SerialNumber"), ("sku", "SKU"),
                        ("system_uuid", "UUID")):
        _put(vendor, key, _text(system.get(source)))
    bios = _text(system.get("BiosVersion"))
    if bios:
        vendor["firmware"] = {"version": bios}
    return vendor


def _cpu(walk: _Walker, system: dict) -> dict:
    cpu: dict[str, Any] = {}
    procs = [p for p in walk.docs(system.get("Processors"))
             if p.get("ProcessorType") in (None, "CPU") and _present(p)]
    if procs:
        threads = [_int(p.get("TotalThreads")) for p in procs]
        cores = [_int(p.get("TotalCores")) for p in procs]
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
        _put(cpu, "model_name", _text(first.get("Model")))
        speed = _int(first.get("MaxSpeedMHz"))
        if speed:
            cpu["frequency"] = str(speed)
        _put(cpu, "architecture", ARCHITECTURES.get(_text(first.get("InstructionSet")) or ""))
        return cpu
    summary = system.get("ProcessorSummary")
    if isinstance(summary, dict):
        _put(cpu, "count", _int(summary.get("LogicalProcessorCount")) or None)
        _put(cpu, "cores", _int(summary.get("CoreCount")) or None)
        _put(cpu, "socket_count", _int(summary.get("Count")) or None)
        _put(cpu, "model_name", _text(summary.get("Model")))
    return cpu


def _memory(walk: _Walker, system: dict) -> tuple[dict, list[dict]]:
    modules = []
    for dimm in walk.docs(system.get("Memory")):
        if not _present(dimm) or not _int(dimm.get("CapacityMiB")):
            continue
        module: dict[str, Any] = {"name": _text(dimm.get("Id")),
                                  "size_mb": dimm["CapacityMiB"]}
        for key, source in (("locator", "DeviceLocator"), ("type", "MemoryDeviceType"),
                            ("manufacturer", "Manufacturer"), ("part_number", "PartNumber"),
                            ("serial_number", "SerialNumber")):
            _put(module, key, _text(dimm.get(source)))
        _put(module, "speed_mhz", _int(dimm.get("OperatingSpeedMhz")))
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


def _network_adapters(walk: _Walker, system: dict) -> list[dict]:
    """The system's chassis' network adapters: what plugin data shows, and port details."""
    adapters = []
    for chassis in walk.docs((system.get("Links") or {}).get("Chassis")):
        for adapter in walk.docs(chassis.get("NetworkAdapters")):
            info: dict[str, Any] = {"id": _text(adapter.get("Id"))}
            for key, source in (("manufacturer", "Manufacturer"), ("model", "Model"),
                                ("serial_number", "SerialNumber"),
                                ("part_number", "PartNumber")):
                _put(info, key, _text(adapter.get(source)))
            ports = []
            for port in walk.docs(adapter.get("Ports") or adapter.get("NetworkPorts")):
                ethernet = port.get("Ethernet") if isinstance(port.get("Ethernet"), dict) \
                    else {}
                macs = ethernet.get("AssociatedMACAddresses") or port.get(
                    "AssociatedNetworkAddresses") or []
                speed = _speed(port)
                entry: dict[str, Any] = {"id": _text(port.get("Id"))}
                _put(entry, "link_status", _text(port.get("LinkStatus")))
                _put(entry, "speed_mbps", speed)
                _put(entry, "mac_addresses", sorted({m for m in map(_normal_mac, macs) if m}))
                lldp = ethernet.get("LLDPReceive")
                ports.append((entry, lldp if isinstance(lldp, dict) else None))
            info["ports"] = [entry for entry, _ in ports]
            adapters.append({"info": info, "ports": ports})
    return adapters


def _speed(port: dict) -> int | None:
    gbps = port.get("CurrentSpeedGbps")
    if isinstance(gbps, (int, float)) and not isinstance(gbps, bool) and gbps > 0:
        return int(gbps * 1000)
    return _int(port.get("CurrentLinkSpeedMbps"))


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


def _interfaces(walk: _Walker, system: dict, bmc_macs: set[str],
                adapters: list[dict]) -> list[dict]:
    interfaces = []
    for nic in walk.docs(system.get("EthernetInterfaces")):
        name = _text(nic.get("Id"))
        mac = _mac(nic)
        if not name or not mac or not _present(nic):
            LOG.info("Redfish interface %.60r skipped: no valid MAC, or absent", name)
            continue
        if mac in bmc_macs:
            LOG.info("Redfish interface %s (%s) is the BMC's own NIC: no port for it", name, mac)
            continue
        iface: dict[str, Any] = {"name": name, "mac_address": mac}
        port = _port_of(mac, adapters)
        speed = _int(nic.get("SpeedMbps"))
        _put(iface, "speed_mbps", speed if speed else (port[0].get("speed_mbps")
                                                        if port else None))
        carrier = _CARRIER.get(_text(nic.get("LinkStatus")) or "")
        if carrier is None and port:
            carrier = _CARRIER.get(port[0].get("link_status") or "")
        _put(iface, "has_carrier", carrier)
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
                _put(fields, key, _text(lldp.get(source)))
            _put(fields, "switch_port_management_vlan_id", _int(lldp.get("ManagementVlanId")))
            addresses = [a for a in (_text(lldp.get("ManagementAddressIPv4")),
                                     _text(lldp.get("ManagementAddressIPv6"))) if a]
            _put(fields, "switch_mgmt_addresses", addresses)
            key = next((names[m] for m in entry.get("mac_addresses", ()) if m in names),
                       entry.get("id"))
            if fields and key:
                parsed[key] = fields
    return parsed


def _smallest_root(sizes: list[int]) -> int:
    eligible = [s for s in sizes if s >= MIN_ROOT_SIZE]
    return min(eligible) if eligible else 0


def _storage(walk: _Walker, system: dict) -> tuple[list[dict], list[dict], int]:
    """IPA's disks, Ironic's storage controllers, and ``local_gb`` as Ironic computes it:
    the smallest volume (else drive) of the Storage resources and the smallest device of
    SimpleStorage, each of at least 4 GiB; the smaller of the two, in GiB, less 1."""
    disks: list[dict] = []
    controllers: list[dict] = []
    volume_sizes: list[int] = []
    drive_sizes: list[int] = []
    for storage in walk.docs(system.get("Storage")):
        controller: dict[str, Any] = {"id": _text(storage.get("Id"))}
        _put(controller, "name", _text(storage.get("Name")))
        controller["storage_controllers"] = [_sub_controller(c) for c in
                                             storage.get("StorageControllers") or []
                                             if isinstance(c, dict)]
        drive_ids = []
        for drive in walk.docs(storage.get("Drives")):
            if not _present(drive):
                continue
            disk = _disk(drive)
            disks.append(disk)
            drive_ids.append(_text(drive.get("Id")))
            if "size" in disk:
                drive_sizes.append(disk["size"])
        controller["drives"] = drive_ids
        volumes = []
        for volume in walk.docs(storage.get("Volumes")):
            size = _int(volume.get("CapacityBytes"))
            entry: dict[str, Any] = {"id": _text(volume.get("Id"))}
            _put(entry, "name", _text(volume.get("Name")))
            _put(entry, "size", size)
            _put(entry, "raid_type", _text(volume.get("RAIDType")))
            _put(entry, "volume_type", _text(volume.get("VolumeType")))
            volumes.append(entry)
            if size and _present(volume):
                volume_sizes.append(size)
        controller["volumes"] = volumes
        controllers.append(controller)
    simple_sizes: list[int] = []
    simple_disks: list[dict] = []
    for simple in walk.docs(system.get("SimpleStorage")):
        for device in simple.get("Devices") or []:
            if not isinstance(device, dict) or not _present(device) or not _text(
                    device.get("Name")):
                continue
            disk = {"name": _text(device.get("Name"))}
            _put(disk, "size", _int(device.get("CapacityBytes")))
            _put(disk, "model", _text(device.get("Model")))
            _put(disk, "vendor", _text(device.get("Manufacturer")))
            simple_disks.append(disk)
            if "size" in disk and _state(device) in (None, "Enabled"):
                simple_sizes.append(disk["size"])
    storage_size = _smallest_root(volume_sizes) or _smallest_root(drive_sizes)
    simple_size = _smallest_root(simple_sizes)
    size = min(s for s in (storage_size, simple_size) if s) if (storage_size or simple_size) \
        else 0
    local_gb = max(0, int(size / GIB - 1))
    return (disks if controllers else simple_disks), controllers, local_gb


def _disk(drive: dict) -> dict:
    disk: dict[str, Any] = {"name": _text(drive.get("Name")) or _text(drive.get("Id"))}
    _put(disk, "size", _int(drive.get("CapacityBytes")))
    _put(disk, "model", _text(drive.get("Model")))
    _put(disk, "vendor", _text(drive.get("Manufacturer")))
    _put(disk, "serial", _text(drive.get("SerialNumber")))
    media = _text(drive.get("MediaType"))
    if media in ("HDD", "SSD"):
        disk["rotational"] = media == "HDD"
    for ident in drive.get("Identifiers") or []:
        if isinstance(ident, dict) and ident.get("DurableNameFormat") in ("NAA", "EUI"):
            wwn = _hex_id(ident.get("DurableName"))
            if wwn:
                disk["wwn"] = f"0x{wwn}"
                break
    return disk


def _sub_controller(controller: dict) -> dict:
    info: dict[str, Any] = {}
    for key, source in (("member_id", "MemberId"), ("name", "Name"), ("model", "Model"),
                        ("manufacturer", "Manufacturer"), ("serial_number", "SerialNumber"),
                        ("firmware_version", "FirmwareVersion")):
        _put(info, key, _text(controller.get(source)))
    speed = controller.get("SpeedGbps")
    if isinstance(speed, (int, float)) and not isinstance(speed, bool):
        info["speed_gbps"] = speed
    for key, source in (("raid_types", "SupportedRAIDTypes"),
                        ("controller_protocols", "SupportedControllerProtocols"),
                        ("device_protocols", "SupportedDeviceProtocols")):
        values = controller.get(source)
        _put(info, key, [v for v in values if isinstance(v, str)]
             if isinstance(values, list) else None)
    return info


def _pci_devices(walk: _Walker, system: dict) -> list[dict]:
    devices = system.get("PCIeDevices")
    if not devices:
        # Newer BMCs list them under the chassis only.
        chassis = list(walk.docs((system.get("Links") or {}).get("Chassis")))
        devices = [link for c in chassis for link in
                   ((walk.doc(c.get("PCIeDevices")) or {}).get("Members") or [])]
    result = []
    for device in walk.docs(devices):
        functions = device.get("PCIeFunctions") or (device.get("Links") or {}).get(
            "PCIeFunctions")
        for function in walk.docs(functions):
            info: dict[str, Any] = {}
            for key, source in (("vendor_id", "VendorId"), ("product_id", "DeviceId"),
                                ("class", "ClassCode"), ("revision", "RevisionId"),
                                ("subsystem_vendor_id", "SubsystemVendorId"),
                                ("subsystem_id", "SubsystemId")):
                _put(info, key, _hex_id(function.get(source)))
            _put(info, "bus", _pci_address(function))
            if "vendor_id" in info or "product_id" in info:
                result.append(info)
    return result


def _pci_address(function: dict) -> str | None:
    """``0000:03:00.1`` from the function's segment, bus, device and function numbers."""
    parts = [_hex_id(function.get(k)) for k in ("SegmentNumber", "BusNumber", "DeviceNumber",
                                                "FunctionNumber")]
    if not all(parts):
        return None
    segment, bus, dev, func = (int(p, 16) for p in parts)  # type: ignore[arg-type]
    return f"{segment:04x}:{bus:02x}:{dev:02x}.{func:x}"
