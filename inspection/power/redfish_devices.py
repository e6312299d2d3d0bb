"""Storage and PCIe devices of a Redfish system, as IPA's ``disks`` and ``pci_devices``,
Ironic's ``storage_controllers``, and ``local_gb`` as Ironic computes it."""

from typing import Any

from inspection.power.redfish_resources import Walker, hex_id, integer, present, put, state, text

GIB = 1024 ** 3
#: Ironic's smallest root device (and IPA's): smaller disks and volumes never count.
MIN_ROOT_SIZE = 4 * GIB


def _smallest_root(sizes: list[int]) -> int:
    eligible = [s for s in sizes if s >= MIN_ROOT_SIZE]
    return min(eligible) if eligible else 0


def storage(walk: Walker, system: dict) -> tuple[list[dict], list[dict], int]:
    """IPA's disks, Ironic's storage controllers, and ``local_gb`` as Ironic computes it:
    the smallest volume (else drive) of the Storage resources and the smallest device of
    SimpleStorage, each of at least 4 GiB; the smaller of the two, in GiB, less 1."""
    disks: list[dict] = []
    controllers: list[dict] = []
    volume_sizes: list[int] = []
    drive_sizes: list[int] = []
    for storage in walk.docs(system.get("Storage")):
        controller: dict[str, Any] = {"id": text(storage.get("Id"))}
        put(controller, "name", text(storage.get("Name")))
        controller["storage_controllers"] = [_sub_controller(c) for c in
                                             storage.get("StorageControllers") or []
                                             if isinstance(c, dict)]
        drive_ids = []
        for drive in walk.docs(storage.get("Drives")):
            if not present(drive):
                continue
            disk = _disk(drive)
            disks.append(disk)
            drive_ids.append(text(drive.get("Id")))
            if "size" in disk:
                drive_sizes.append(disk["size"])
        controller["drives"] = drive_ids
        volumes = []
        for volume in walk.docs(storage.get("Volumes")):
            size = integer(volume.get("CapacityBytes"))
            entry: dict[str, Any] = {"id": text(volume.get("Id"))}
            put(entry, "name", text(volume.get("Name")))
            put(entry, "size", size)
            put(entry, "raid_type", text(volume.get("RAIDType")))
            put(entry, "volume_type", text(volume.get("VolumeType")))
            volumes.append(entry)
            if size and present(volume):
                volume_sizes.append(size)
        controller["volumes"] = volumes
        controllers.append(controller)
    simple_sizes: list[int] = []
    simple_disks: list[dict] = []
    for simple in walk.docs(system.get("SimpleStorage")):
        for device in simple.get("Devices") or []:
            if not isinstance(device, dict) or not present(device) or not text(
                    device.get("Name")):
                continue
            disk = {"name": text(device.get("Name"))}
            put(disk, "size", integer(device.get("CapacityBytes")))
            put(disk, "model", text(device.get("Model")))
            put(disk, "vendor", text(device.get("Manufacturer")))
            simple_disks.append(disk)
            if "size" in disk and state(device) in (None, "Enabled"):
                simple_sizes.append(disk["size"])
    storage_size = _smallest_root(volume_sizes) or _smallest_root(drive_sizes)
    simple_size = _smallest_root(simple_sizes)
    size = min(s for s in (storage_size, simple_size) if s) if (storage_size or simple_size) \
        else 0
    local_gb = max(0, int(size / GIB - 1))
    return (disks if controllers else simple_disks), controllers, local_gb


def _disk(drive: dict) -> dict:
    disk: dict[str, Any] = {"name": text(drive.get("Name")) or text(drive.get("Id"))}
    put(disk, "size", integer(drive.get("CapacityBytes")))
    put(disk, "model", text(drive.get("Model")))
    put(disk, "vendor", text(drive.get("Manufacturer")))
    put(disk, "serial", text(drive.get("SerialNumber")))
    media = text(drive.get("MediaType"))
    if media in ("HDD", "SSD"):
        disk["rotational"] = media == "HDD"
    for ident in drive.get("Identifiers") or []:
        if isinstance(ident, dict) and ident.get("DurableNameFormat") in ("NAA", "EUI"):
            wwn = hex_id(ident.get("DurableName"))
            if wwn:
                disk["wwn"] = f"0x{wwn}"
                break
    return disk


def _sub_controller(controller: dict) -> dict:
    info: dict[str, Any] = {}
    for key, source in (("member_id", "MemberId"), ("name", "Name"), ("model", "Model"),
                        ("manufacturer", "Manufacturer"), ("serial_number", "SerialNumber"),
                        ("firmware_version", "FirmwareVersion")):
        put(info, key, text(controller.get(source)))
    speed = controller.get("SpeedGbps")
    if isinstance(speed, (int, float)) and not isinstance(speed, bool):
        info["speed_gbps"] = speed
    for key, source in (("raid_types", "SupportedRAIDTypes"),
                        ("controller_protocols", "SupportedControllerProtocols"),
                        ("device_protocols", "SupportedDeviceProtocols")):
        values = controller.get(source)
        put(info, key, [v for v in values if isinstance(v, str)]
             if isinstance(values, list) else None)
    return info


def pci_devices(walk: Walker, system: dict) -> list[dict]:
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
                put(info, key, hex_id(function.get(source)))
            put(info, "bus", _pci_address(function))
            if "vendor_id" in info or "product_id" in info:
                result.append(info)
    return result


def _pci_address(function: dict) -> str | None:
    """``0000:03:00.1`` from the function's segment, bus, device and function numbers."""
    parts = [hex_id(function.get(k)) for k in ("SegmentNumber", "BusNumber", "DeviceNumber",
                                                "FunctionNumber")]
    if not all(parts):
        return None
    segment, bus, dev, func = (int(p, 16) for p in parts)  # type: ignore[arg-type]
    return f"{segment:04x}:{bus:02x}:{dev:02x}.{func:x}"
