"""Out-of-band inspection (``inspect_interface = redfish``) against real Redfish servers:
``sushy-static`` serving a mockup assembled from DMTF sample resources
(tests/fixtures/redfish_mockup), and sushy-tools' emulator. Driven through the API
all-in-one, whose BMC actor reads the BMC and processes the inventory.
"""

import time
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from inspection.db.models import Node
from inspection.power.redfish_devices import GIB
from pxe_filter.policy import pxe_allowed
from tests.integration.test_power import node, provision, wait_state
from tests.support.bmcs import SilentBmc, SushyEmulator, SushyStatic, free_port

MOCKUP = Path(__file__).resolve().parents[1] / "fixtures" / "redfish_mockup"
SYSTEM = "/redfish/v1/Systems/437XR1138R2"
BMC_OPTS = {"poll_interval": 0.2, "call_timeout": 2, "call_retries": 1,
            "retry_interval": 0.1, "max_sessions": 8}
#: Every hook that can use out-of-band data, plus ones that cannot (skipped).
HOOKS = "validate-interfaces,ports,architecture,cpus,ramdisk-error,extra-hardware"
RULE = {"description": "tag Contoso machines", "phase": "main",
        "conditions": [{"op": "eq", "args": ["{inventory[system_vendor][manufacturer]}",
                                             "Contoso"]}],
        "actions": [{"op": "set-attribute", "args": ["/extra/rack", "R42"]},
                    {"op": "set-attribute", "args": ["/extra/disks",
                                                     "{inventory[disks]}"]}]}

#: What the mockup's resources say, mapped as docs/bmc.md describes (read by hand from the
#: JSON files, not from the code under test).
EXPECTED_INVENTORY = {
    "system_vendor": {"manufacturer": "Contoso", "product_name": "3500",
                      "serial_number": "437XR1138R2", "sku": "8675309",
                      "system_uuid": "38947555-7742-3448-3784-823347823834",
                      "firmware": {"version": "P79 v1.45 (12/06/2017)"}},
    "boot": {"current_boot_mode": "uefi"},
    "cpu": {"count": 32, "cores": 16, "socket_count": 2, "architecture": "x86_64",
            "model_name": "Multi-Core Intel(R) Xeon(R) processor 7xxx Series",
            "frequency": "3700"},
    "memory": {"physical_mb": 96 * 1024},
    "bmc_address": "192.168.0.5", "bmc_v6address": "f82f:ff01:1bb0:7750::2",
    "bmc_mac": "b4:ac:57:49:90:ca",
    # The third system interface carries the BMC's MAC: never an interface of the machine.
    "interfaces": [
        {"name": "1", "mac_address": "12:44:6a:3b:04:11", "speed_mbps": 1000,
         "has_carrier": True},
        {"name": "2", "mac_address": "12:44:6a:3b:04:12", "speed_mbps": 10000,
         "has_carrier": False}],
    "disks": [
        {"name": "Drive Sample", "size": 899527000000, "model": "C123", "vendor": "Contoso",
         "serial": "1234567", "rotational": True, "wwn": "0x35d38f11acef7bd3"},
        {"name": "Drive Sample", "size": 479559942144, "model": "S456", "vendor": "Contoso",
         "serial": "1234569", "rotational": False, "wwn": "0x3f5a8c54207b7233"},
        {"name": "Drive Sample", "size": 899527000000, "model": "C123", "vendor": "Contoso",
         "serial": "1234570", "rotational": True, "wwn": "0x32adf365c6c1b7bd"},
        {"name": "Drive Sample", "size": 899527000000, "model": "C123", "vendor": "Contoso",
         "serial": "1234568", "rotational": True, "wwn": "0x32adf365c6c1b7bd"}],
    "storage_controllers": [{
        "id": "1", "name": "Local Storage Controller",
        "storage_controllers": [{
            "member_id": "0", "model": "12Gbs Integrated RAID", "manufacturer": "Contoso",
            "serial_number": "2M220100SL", "firmware_version": "1.0.0.7", "speed_gbps": 12,
            "raid_types": ["RAID0", "RAID1"], "controller_protocols": ["PCIe"],
            "device_protocols": ["SAS", "SATA"]}],
        "drives": ["35D38F11ACEF7BD3", "3F5A8C54207B7233", "32ADF365C6C1B7BD",
                   "3D58ECBC375FD9F2"],
        "volumes": [
            {"id": "1", "name": "Virtual Disk 1", "size": 899527000000,
             "volume_type": "Mirrored"},
            {"id": "2", "name": "Virtual Disk 2", "size": 107374182400,
             "volume_type": "NonRedundant"},
            {"id": "3", "name": "Virtual Disk 3", "size": 1073741824000,
             "volume_type": "NonRedundant"}]}],
    "pci_devices": [
        {"vendor_id": "14e4", "product_id": "16d7", "class": "000002", "revision": "01",
         "subsystem_vendor_id": "14e4", "subsystem_id": "1402", "bus": "0000:03:00.0"},
        {"vendor_id": "14e4", "product_id": "16d7", "class": "000002", "revision": "01",
         "subsystem_vendor_id": "14e4", "subsystem_id": "1402", "bus": "0000:03:00.1"},
        {"vendor_id": "1022", "product_id": "14a4", "class": "060000", "revision": "00",
         "subsystem_vendor_id": "0000", "subsystem_id": "0000", "bus": "0000:80:01.0"}],
}
EXPECTED_MODULES = [
    {"name": f"DIMM{i}", "size_mb": 32768, "locator": f"PROC 1 DIMM {i}", "type": "DDR4",
     "manufacturer": "Contoso", "part_number": "M393A4K40BB1-CRC", "serial_number": serial,
     "speed_mhz": 2400}
    for i, serial in ((1, "4A3B2C1D"), (2, "4A3B2C1E"), (3, "4A3B2C1F"))]
EXPECTED_LLDP = {"1": {"switch_chassis_id": "c4:7e:e0:e4:55:3f",
                       "switch_port_id": "0A:1B:2C:3D:4E:5F:6A:7B:8C:9D:0E:1F:2A",
                       "switch_system_name": "switch-00.example.com",
                       "switch_system_description": "Test Software, Version 00.00.00",
                       "switch_port_management_vlan_id": 100,
                       "switch_mgmt_addresses": ["192.168.1.1", "fe80::1"]}}


@pytest.fixture(scope="module")
def static_bmc(tmp_path_factory):
    server = SushyStatic(tmp_path_factory.mktemp("static"), MOCKUP).start()
    yield server
    server.stop()


#: The emulator's fake systems have no storage of their own: each gets these drives.
DRIVES = [{"Id": "D1", "Name": "Drive 1", "CapacityBytes": 480103981056, "MediaType": "SSD",
           "Protocol": "SATA", "SerialNumber": "S1"},
          {"Id": "D2", "Name": "Drive 2", "CapacityBytes": 2 * GIB, "MediaType": "HDD",
           "Protocol": "SAS"}]


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    emu = SushyEmulator(tmp_path_factory.mktemp("sushy-oob"), count=12, nics=2,
                        drives=DRIVES).start()
    yield emu
    emu.stop()


@pytest.fixture
def make_api(tmp_path):
    from tests.integration.api_helpers import Api, api_conf  # noqa: PLC0415
    apis = []

    def make(**groups) -> Api:
        from inspection.db import migration  # noqa: PLC0415
        from pxe_filter.common.database import create_engine  # noqa: PLC0415

        groups.setdefault("redfish", {"inspection_hooks": HOOKS})
        groups.setdefault("inspector", {"add_ports": "all"})
        conf = api_conf(tmp_path, f"sqlite:///{tmp_path}/oob.sqlite",
                        bmc={**BMC_OPTS, **groups.pop("bmc", {})}, **groups)
        engine = create_engine(conf.database.connection)
        migration.upgrade(engine)
        engine.dispose()
        api = Api(conf)
        apis.append(api)
        return api

    yield make
    for api in apis:
        api.close()


def enroll_redfish(api, name: str, driver_info: dict) -> dict:
    created = api.client.post("/v1/nodes", json={"name": name, "driver": "redfish",
                                                 "inspect_interface": "redfish",
                                                 "driver_info": driver_info})
    assert created.status_code == 201, created.json
    provision(api, name, "manage")
    wait_state(api, name, "manageable")
    return created.json


def inspected(api, name: str, state: str = "manageable", timeout: float = 30) -> dict:
    provision(api, name, "inspect")
    return wait_state(api, name, state, timeout=timeout)


def ports_of(api, uuid: str) -> dict[str, bool]:
    resp = api.client.get(f"/v1/ports?node_uuid={uuid}&detail=true")
    assert resp.status_code == 200, resp.json
    return {p["address"]: p["pxe_enabled"] for p in resp.json["ports"]}


def test_mockup_inventory_properties_ports_and_rules_without_power_or_boot(
        make_api, static_bmc, caplog):
    api = make_api(inspection_rules={"supported_interfaces": "^(agent|redfish)$"})
    assert api.client.post("/v1/inspection_rules", json=RULE).status_code == 201
    info = {"redfish_address": static_bmc.url, "redfish_system_id": SYSTEM}
    created = enroll_redfish(api, "mockup", info)
    before = len(static_bmc.requests())

    shown = inspected(api, "mockup")

    assert shown["last_error"] is None
    assert "bmc_task" not in (shown["driver_internal_info"] or {})
    # As Ironic's redfish inspection: memory from MemorySummary; local_gb from the smallest
    # volume of at least 4 GiB (100 GiB) less 1 GiB; cpu_arch and cpus through hooks.
    props = shown["properties"]
    assert props["memory_mb"] == 98304
    assert props["local_gb"] == 107374182400 // GIB - 1 == 99
    assert props["cpu_arch"] == "x86_64"
    assert props["cpus"] == 32
    # Main rules ran on the BMC's data (supported_interfaces includes redfish).
    assert shown["extra"]["rack"] == "R42"
    assert [d["serial"] for d in shown["extra"]["disks"]] == [
        "1234567", "1234569", "1234570", "1234568"]
    # One port per system interface with a MAC, none for the BMC's own NIC; add_ports=all.
    assert ports_of(api, created["uuid"]) == {"12:44:6a:3b:04:11": True,
                                              "12:44:6a:3b:04:12": True}
    stored = api.client.get("/v1/nodes/mockup/inventory", headers={
        "X-OpenStack-Ironic-API-Version": "1.81"})
    assert stored.status_code == 200, stored.json
    assert stored.json["inventory"] == EXPECTED_INVENTORY
    plugin = stored.json["plugin_data"]
    assert plugin["memory_modules"] == EXPECTED_MODULES
    assert plugin["parsed_lldp"] == EXPECTED_LLDP
    assert plugin["network_adapters"][0]["model"] == "MLNX 25GbE 2P ConnectX4LX RNDC"
    assert sorted(plugin["macs"]) == ["12:44:6a:3b:04:11", "12:44:6a:3b:04:12"]
    # Only reads reached the BMC: no power action, no boot device change.
    served = static_bmc.requests()[before:]
    assert served and {method for method, _ in served} == {"GET"}, served
    assert (("GET", f"{SYSTEM}/Storage/1/Volumes/2")) in served
    # Hooks that need the ramdisk's data were skipped, and said so.
    assert "Hook ramdisk-error in [redfish]inspection_hooks is skipped" in caplog.text
    assert "Hook extra-hardware in [redfish]inspection_hooks is skipped" in caplog.text
    # The PXE filter never serves a node inspected out-of-band, in any state.
    for state in ("inspecting", "inspect wait", "manageable"):
        assert not pxe_allowed(state, "redfish", api.conf.pxe_filter.supported_inspect_interfaces)


def test_rules_do_not_run_on_bmc_data_by_default_and_pxe_means_every_interface(
        make_api, static_bmc):
    api = make_api(inspector={"add_ports": "pxe"})
    assert api.client.post("/v1/inspection_rules", json=RULE).status_code == 201
    created = enroll_redfish(api, "no-rules", {"redfish_address": static_bmc.url,
                                               "redfish_system_id": SYSTEM})
    shown = inspected(api, "no-rules")
    assert "rack" not in shown["extra"]
    # No PXE interface is known out-of-band: every interface, as Ironic does.
    assert set(ports_of(api, created["uuid"])) == {"12:44:6a:3b:04:11", "12:44:6a:3b:04:12"}


def test_active_means_link_up(make_api, static_bmc):
    api = make_api(inspector={"add_ports": "active"})
    created = enroll_redfish(api, "active", {"redfish_address": static_bmc.url,
                                             "redfish_system_id": SYSTEM})
    inspected(api, "active")
    assert set(ports_of(api, created["uuid"])) == {"12:44:6a:3b:04:11"}


def test_emulator_inventory_and_no_power_change(make_api, emulator):
    api = make_api(redfish={"inspection_hooks": "validate-interfaces,ports"})
    created = enroll_redfish(api, "emu-0", emulator.driver_info(0))
    system = emulator.system(0)
    shown = inspected(api, "emu-0")
    inventory = api.client.get("/v1/nodes/emu-0/inventory", headers={
        "X-OpenStack-Ironic-API-Version": "1.81"}).json["inventory"]
    assert inventory["system_vendor"] == {"manufacturer": system["Manufacturer"],
                                          "system_uuid": system["UUID"]}
    assert inventory["boot"] == {"current_boot_mode": "uefi"}
    assert sorted(i["mac_address"] for i in inventory["interfaces"]) == emulator.macs(0)
    # The emulator fills in its own drive details: compare with what it serves.
    served = [requests.get(f"{emulator.url}/redfish/v1/Systems/{emulator.systems[0]}/Storage/"
                           f"1/Drives/{d['Id']}", auth=(emulator.user, emulator.password),
                           timeout=5).json() for d in DRIVES]
    assert inventory["disks"] == [
        {"name": d["Name"], "size": d["CapacityBytes"], "model": d["Model"],
         "vendor": d["Manufacturer"], "serial": d["SerialNumber"],
         "rotational": d["MediaType"] == "HDD"} for d in served]
    assert [d["size"] for d in inventory["disks"]] == [480103981056, 2 * GIB]
    # The smallest drive of at least 4 GiB, less 1 GiB (the emulator shows no volumes).
    assert shown["properties"]["local_gb"] == 480103981056 // GIB - 1
    # What the emulator does not say stays absent (no CPU or memory data).
    assert "cpu" not in inventory and "memory" not in inventory
    assert "memory_mb" not in shown["properties"]
    assert set(ports_of(api, created["uuid"])) == set(emulator.macs(0))
    assert emulator.power(0) == "Off" and emulator.boot_target(0) == system["Boot"][
        "BootSourceOverrideTarget"]


def test_wrong_credentials_fail_with_the_bmc_named(make_api, emulator):
    api = make_api()
    enroll_redfish(api, "emu-1", emulator.driver_info(1))
    patched = api.client.patch("/v1/nodes/emu-1", json=[
        {"op": "replace", "path": "/driver_info/redfish_password", "value": "wrong"}])
    assert patched.status_code == 200, patched.json
    shown = inspected(api, "emu-1", "inspect failed")
    assert emulator.url in shown["last_error"]
    assert "refused the credentials" in shown["last_error"]
    assert "wrong" not in shown["last_error"]
    assert emulator.power(1) == "Off"


def test_unreachable_and_missing_system_fail_with_the_bmc_named(make_api, emulator):
    api = make_api()
    enroll_redfish(api, "gone", emulator.driver_info(2))
    address = f"http://127.0.0.1:{free_port()}"
    api.client.patch("/v1/nodes/gone", json=[
        {"op": "replace", "path": "/driver_info/redfish_address", "value": address}])
    shown = inspected(api, "gone", "inspect failed")
    assert f"cannot connect to Redfish BMC {address}" in shown["last_error"]

    enroll_redfish(api, "nosys", emulator.driver_info(3))
    api.client.patch("/v1/nodes/nosys", json=[
        {"op": "replace", "path": "/driver_info/redfish_system_id",
         "value": "/redfish/v1/Systems/no-such-system"}])
    shown = inspected(api, "nosys", "inspect failed")
    assert f"Redfish BMC {emulator.url} has no such system" in shown["last_error"]


def test_refused_without_the_redfish_hardware_type(make_api):
    api = make_api()
    created = api.client.post("/v1/nodes", json={"name": "fake", "driver": "fake-hardware",
                                                 "inspect_interface": "redfish"})
    assert created.status_code == 201
    inspect = api.client.get("/v1/nodes/fake/validate").json["inspect"]
    assert inspect["result"] is False and "redfish hardware type" in inspect["reason"]
    provision(api, "fake", "manage")
    resp = api.client.put("/v1/nodes/fake/states/provision", json={"target": "inspect"})
    assert resp.status_code == 400
    assert "needs the redfish hardware type" in resp.json["error_message"]
    assert node(api, "fake")["provision_state"] == "manageable"


def test_many_nodes_bounded_per_bmc_and_a_dead_bmc_blocks_nobody(make_api, emulator):
    dead = SilentBmc()
    try:
        api = make_api(redfish={"inspection_hooks": "validate-interfaces,ports"},
                       bmc={"max_sessions_per_bmc": 2, "call_timeout": 4, "call_retries": 0})
        names = [f"many-{i}" for i in range(4, 12)]
        for i, name in enumerate(names, start=4):
            enroll_redfish(api, name, emulator.driver_info(i))
        # Nodes on a BMC that accepts connections and never answers.
        for i in range(3):
            created = api.client.post("/v1/nodes", json={
                "name": f"hung-{i}", "driver": "redfish", "inspect_interface": "redfish",
                "driver_info": {"redfish_address": dead.url}})
            assert created.status_code == 201
        # Verifying them would hang too: they became manageable before their BMC hung.
        with api.context.engine.begin() as conn:
            conn.execute(sa.update(Node).where(Node.name.like("hung-%"))
                         .values(provision_state="manageable"))
        pool = api.context.dispatcher.power.pool
        pool.most_open = 0
        started = time.monotonic()
        for i in range(3):
            provision(api, f"hung-{i}", "inspect")
        for name in names:
            provision(api, name, "inspect")
        # The API answers at once while the dead BMC's reads hang.
        asked = time.monotonic()
        assert api.client.get("/v1/nodes/hung-0").json["provision_state"] == "inspecting"
        assert time.monotonic() - asked < 1
        for name in names:
            wait_state(api, name, "manageable", timeout=30)
        healthy_done = time.monotonic() - started
        # The emulator's nodes finished while the dead BMC's are still being waited for
        # (it holds at most 2 sessions, each up to call_timeout).
        assert node(api, "hung-2")["provision_state"] == "inspecting"
        assert healthy_done < 2 * 4  # the third hung read ends after two call_timeouts
        assert pool.most_open <= 4  # 2 per BMC, two BMCs
        for i in range(3):
            shown = wait_state(api, f"hung-{i}", "inspect failed", timeout=30)
            assert f"Redfish BMC {dead.url} did not answer in time" in shown["last_error"]
        assert emulator.power(4) == "Off"
    finally:
        dead.close()


def test_split_mode_the_worker_inspects_out_of_band(tmp_path, static_bmc, sqlite_url):
    """API and worker as real processes on a message bus: the worker's BMC actor reads and
    processes; the API only records the work."""
    from inspection.db import migration  # noqa: PLC0415
    from pxe_filter.common.database import create_engine  # noqa: PLC0415
    from tests.support import services  # noqa: PLC0415
    from tests.support.services_procs import API_HEADERS, start_api, start_worker  # noqa: PLC0415

    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(Node).values(
            uuid="0b0b0b0b-0000-4000-8000-000000000001", name="split", driver="redfish",
            inspect_interface="redfish", provision_state="manageable",
            driver_info={"redfish_address": static_bmc.url, "redfish_system_id": SYSTEM},
            driver_internal_info={}, properties={}, extra={}))
    engine.dispose()
    vhost = services.create_vhost()
    conf = {"redfish": {"inspection_hooks": "validate-interfaces,ports,architecture"},
            "bmc": {"poll_interval": 0.5}}
    worker = start_worker(tmp_path, sqlite_url, vhost, conf)
    api = start_api(tmp_path, sqlite_url, vhost, conf)
    try:
        worker.wait_ready()
        api.wait_ready()
        resp = requests.put(f"{api.url}/v1/nodes/split/states/provision",
                            json={"target": "inspect"}, headers=API_HEADERS, timeout=10)
        assert resp.status_code == 202, resp.text

        def done():
            shown = requests.get(f"{api.url}/v1/nodes/split", headers=API_HEADERS,
                                 timeout=10).json()
            return shown if shown["provision_state"] != "inspecting" else None
        deadline = time.monotonic() + 30
        while not (shown := done()):
            assert time.monotonic() < deadline, "the worker did not inspect the node"
            time.sleep(0.2)
        assert shown["provision_state"] == "manageable", shown["last_error"]
        assert shown["properties"]["cpu_arch"] == "x86_64"
        assert shown["properties"]["local_gb"] == 99
    finally:
        codes = [api.stop(), worker.stop()]
        services.delete_vhost(vhost)
    assert codes == [0, 0], worker.log_text()
