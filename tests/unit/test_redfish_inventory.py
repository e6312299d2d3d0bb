"""The Redfish -> inventory mapping on documents a real BMC would not send: junk types, missing
resources, huge collections, older BMCs (SimpleStorage, ProcessorSummary only).

The documents are served by a dictionary (the mapping only ever GETs a path); the full
mapping against real Redfish servers is in tests/integration/test_redfish_inspection.py.
"""

import pytest

from inspection.power.redfish_devices import GIB
from inspection.power.redfish_inventory import read_inventory
from inspection.power.redfish_resources import MAX_MEMBERS, MissingResource

SYS = "/redfish/v1/Systems/1"


def reader(docs: dict):
    requested = []

    def get(path: str) -> dict:
        requested.append(path)
        if path not in docs:
            raise MissingResource(path)
        return docs[path]
    get.requested = requested  # type: ignore[attr-defined]
    return get


def collection(*paths: str) -> dict:
    return {"Members": [{"@odata.id": p} for p in paths]}


def test_junk_values_are_left_out_never_guessed():
    system = {"Manufacturer": 42, "Model": "  ", "SerialNumber": ["x"], "UUID": None,
              "Boot": {"BootSourceOverrideMode": "Weird"},
              "MemorySummary": {"TotalSystemMemoryGiB": "96"},
              "ProcessorSummary": {"Count": True, "LogicalProcessorCount": "8"},
              "EthernetInterfaces": {"@odata.id": f"{SYS}/EthernetInterfaces"}}
    docs = {f"{SYS}/EthernetInterfaces": collection(f"{SYS}/EthernetInterfaces/1",
                                                    f"{SYS}/EthernetInterfaces/2",
                                                    f"{SYS}/EthernetInterfaces/3"),
            f"{SYS}/EthernetInterfaces/1": {"Id": "1", "MACAddress": "not-a-mac",
                                            "SpeedMbps": "fast", "LinkStatus": 1},
            f"{SYS}/EthernetInterfaces/2": {"Id": "2", "MACAddress": "00:00:00:00:00:00",
                                            "PermanentMACAddress": "AA-BB-CC-DD-EE-01",
                                            "SpeedMbps": True, "LinkStatus": "NoLink"},
            f"{SYS}/EthernetInterfaces/3": {"Id": "3", "MACAddress": "aa:bb:cc:dd:ee:03",
                                            "Status": {"State": "Absent"}}}
    reading = read_inventory(reader(docs), system, "https://bmc.example.com")
    assert reading.inventory == {"interfaces": [
        {"name": "2", "mac_address": "aa:bb:cc:dd:ee:01", "has_carrier": False}]}
    assert reading.plugin_data == {}
    assert reading.local_gb == 0


def test_linked_resources_the_bmc_lacks_are_listed_not_fatal():
    system = {"Processors": {"@odata.id": f"{SYS}/Processors"},
              "Memory": {"@odata.id": f"{SYS}/Memory"},
              "ProcessorSummary": {"Count": 2, "LogicalProcessorCount": 16, "CoreCount": 8,
                                   "Model": "Xeon"},
              "MemorySummary": {"TotalSystemMemoryGiB": 0.5}}
    reading = read_inventory(reader({}), system, "https://[2001:db8::17]/redfish")
    assert reading.inventory == {
        "cpu": {"count": 16, "cores": 8, "socket_count": 2, "model_name": "Xeon"},
        "memory": {"physical_mb": 512},
        "bmc_v6address": "2001:db8::17", "interfaces": []}
    assert reading.plugin_data == {"redfish_missing_resources": [f"{SYS}/Processors",
                                                                 f"{SYS}/Memory"]}


def test_an_architecture_redfish_does_not_pin_down_stays_absent():
    system = {"Processors": {"@odata.id": f"{SYS}/Processors"}}
    docs = {f"{SYS}/Processors": collection(f"{SYS}/Processors/1", f"{SYS}/Processors/2"),
            f"{SYS}/Processors/1": {"ProcessorType": "CPU", "ProcessorArchitecture": "x86",
                                    "TotalCores": 4},
            f"{SYS}/Processors/2": {"ProcessorType": "GPU", "TotalCores": 1000}}
    cpu = read_inventory(reader(docs), system, "https://bmc").inventory["cpu"]
    assert cpu == {"count": 4, "cores": 4, "socket_count": 1}


def test_collections_are_bounded():
    members = [f"{SYS}/EthernetInterfaces/{i}" for i in range(MAX_MEMBERS + 50)]
    docs = {f"{SYS}/EthernetInterfaces": collection(*members)}
    docs.update({p: {"Id": str(i), "MACAddress": f"02:00:00:00:{i >> 8:02x}:{i & 255:02x}"}
                 for i, p in enumerate(members)})
    get = reader(docs)
    reading = read_inventory(get, {"EthernetInterfaces": {
        "@odata.id": f"{SYS}/EthernetInterfaces"}}, "https://bmc")
    assert len(reading.inventory["interfaces"]) == MAX_MEMBERS
    assert len(get.requested) == MAX_MEMBERS + 1


@pytest.mark.parametrize(("devices", "local_gb"), [
    # The smallest enabled device of at least 4 GiB, less 1 GiB.
    ([(3 * GIB, "Enabled"), (500 * GIB, "Enabled"), (200 * GIB, "Enabled")], 199),
    ([(100 * GIB, "Absent"), (300 * GIB, None)], 299),
    ([(3 * GIB, "Enabled")], 0),
])
def test_simple_storage_only(devices, local_gb):
    system = {"SimpleStorage": {"@odata.id": f"{SYS}/SimpleStorage"}}
    docs = {f"{SYS}/SimpleStorage": collection(f"{SYS}/SimpleStorage/1"),
            f"{SYS}/SimpleStorage/1": {"Devices": [
                {"Name": f"Bay {i}", "CapacityBytes": size,
                 **({"Status": {"State": state}} if state else {})}
                for i, (size, state) in enumerate(devices)] + ["junk", {"Name": 7}]}}
    reading = read_inventory(reader(docs), system, "https://bmc")
    assert reading.local_gb == local_gb
    assert [d["name"] for d in reading.inventory["disks"]] == [
        f"Bay {i}" for i, (_, state) in enumerate(devices) if state != "Absent"]


def test_storage_volumes_win_over_drives_and_the_smaller_of_storage_and_simple():
    system = {"Storage": {"@odata.id": f"{SYS}/Storage"},
              "SimpleStorage": {"@odata.id": f"{SYS}/SimpleStorage"}}
    docs = {f"{SYS}/Storage": collection(f"{SYS}/Storage/1"),
            f"{SYS}/Storage/1": {"Id": "1", "Drives": [{"@odata.id": f"{SYS}/Drives/a"}],
                                 "Volumes": {"@odata.id": f"{SYS}/Storage/1/Volumes"}},
            f"{SYS}/Drives/a": {"Id": "a", "Name": "A", "CapacityBytes": 50 * GIB},
            f"{SYS}/Storage/1/Volumes": collection(f"{SYS}/Volumes/1"),
            f"{SYS}/Volumes/1": {"Id": "1", "CapacityBytes": 40 * GIB},
            f"{SYS}/SimpleStorage": collection(f"{SYS}/SimpleStorage/1"),
            f"{SYS}/SimpleStorage/1": {"Devices": [{"Name": "S", "CapacityBytes": 30 * GIB}]}}
    reading = read_inventory(reader(docs), system, "https://bmc")
    assert reading.local_gb == 29
    # Disks come from Storage when the BMC has it (as Ironic).
    assert reading.inventory["disks"] == [{"name": "A", "size": 50 * GIB}]


def test_text_from_the_bmc_is_bounded():
    system = {"Model": "x" * 100_000, "SerialNumber": " SN1 "}
    vendor = read_inventory(reader({}), system, "https://bmc").inventory["system_vendor"]
    assert vendor == {"product_name": "x" * 1024, "serial_number": "SN1"}
