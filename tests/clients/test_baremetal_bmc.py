"""``baremetal node manage`` and ``node inspect`` on redfish and ipmi nodes, split mode: an
API process and a worker process on RabbitMQ; the worker drives sushy-tools' Redfish
emulator and a pyghmi IPMI BMC. The ramdisk's data is posted as IPA posts it."""

import json

import pytest
import requests

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.clients.runners import Baremetal, Server, wait_for
from tests.integration.test_redfish_inspection import EXPECTED_INVENTORY, MOCKUP, SYSTEM
from tests.support.bmcs import IpmiBmc, SushyEmulator, SushyStatic
from tests.support.callbacks import callback_body, machine_macs
from tests.support.services_procs import start_api, start_worker

pytestmark = pytest.mark.slow

BMC = {"bmc": {"poll_interval": 0.5, "call_timeout": 3, "call_retries": 1,
               "retry_interval": 0.2, "power_state_change_timeout": 40}}


@pytest.fixture(scope="module")
def split(tmp_path_factory, rabbit_url):
    workdir = tmp_path_factory.mktemp("split")
    db = f"sqlite:///{workdir}/inspection.sqlite"
    engine = create_engine(db)
    migration.upgrade(engine)
    engine.dispose()
    api = start_api(workdir, db, rabbit_url, extra_conf=BMC)
    worker = start_worker(workdir, db, rabbit_url, extra_conf=BMC)
    api.wait_ready()
    worker.wait_ready()
    yield Server(api, None), worker
    assert worker.stop() == 0, worker.log_text()
    assert api.stop() == 0, api.log_text()
    for process in (api, worker):
        assert "Traceback" not in process.log_text(), process.log_text()


@pytest.fixture(scope="module")
def bm(clients_bin, split, client_home):
    return Baremetal(clients_bin, split[0], client_home)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    emu = SushyEmulator(tmp_path_factory.mktemp("sushy"), count=1).start()
    yield emu
    emu.stop()


@pytest.fixture(scope="module")
def ipmi_bmc(tmp_path_factory):
    bmc = IpmiBmc(tmp_path_factory.mktemp("ipmi")).start()
    yield bmc
    bmc.stop()


def show(bm, name: str) -> dict:
    # Polled over plain HTTP: a client process costs a second of imports per look.
    resp = bm.server.http("GET", f"/v1/nodes/{name}")
    assert resp.status_code == 200, resp.text
    return resp.json()


def settled(bm, name: str, state: str, power: str, timeout: float = 40) -> dict:
    """Wait until the node is in ``state`` with ``power`` and no power change pending."""
    def check():
        node = show(bm, name)
        done = (node["provision_state"], node["power_state"], node["target_power_state"]) \
            == (state, power, None)
        return node if done else None
    return wait_for(check, timeout, f"{name} {state} / {power}")


def driver_info_args(info: dict) -> list[str]:
    return [arg for key, value in info.items() for arg in ("--driver-info", f"{key}={value}")]


def inspect_as_ipa(bm, split, name: str, mac: str, machine_on) -> None:
    """manage, inspect, the machine boots, the ramdisk posts; ends manageable and off."""
    bm.ok("node", "manage", name, "--wait", "60")
    assert bm.json("node", "show", name)["power_state"] == "power off"
    bm.ok("node", "inspect", name)
    wait_for(machine_on, 40, f"{name}'s machine on")
    settled(bm, name, "inspect wait", "power on")
    posted = requests.post(split[0].callback_url, json=callback_body(mac), timeout=10)
    assert posted.status_code == 202, posted.text
    settled(bm, name, "manageable", "power off")


def test_redfish_node_boots_from_network_and_ends_off(bm, split, emulator):
    mac = machine_macs(1, "52:54:00:f1")[0]
    bm.ok("node", "create", "--driver", "redfish", "--name", "bmc-rf",
          *driver_info_args(emulator.driver_info()))
    bm.ok("port", "create", mac, "--node", "bmc-rf")
    validation = {v["Interface"]: v for v in bm.json("node", "validate", "bmc-rf")}
    assert validation["power"]["Result"] is True, validation
    inspect_as_ipa(bm, split, "bmc-rf", mac, lambda: emulator.power() == "On")
    assert emulator.boot_target() == "Pxe"
    assert emulator.power() == "Off"



def test_out_of_band_inspection_with_the_client(bm, tmp_path):
    """``--inspect-interface redfish``: the worker reads a realistic mockup, nothing boots."""
    static = SushyStatic(tmp_path / "static", MOCKUP).start()
    try:
        bm.ok("node", "create", "--driver", "redfish", "--name", "oob",
              "--inspect-interface", "redfish",
              *driver_info_args({"redfish_address": static.url,
                                 "redfish_system_id": SYSTEM}))
        bm.ok("node", "manage", "oob")
        settled(bm, "oob", "manageable", "power on")  # the mockup's machine runs its OS
        bm.ok("node", "inspect", "oob")

        def inspected():
            node = show(bm, "oob")
            return node if node["provision_state"] != "inspecting" else None
        node = wait_for(inspected, 40, "oob inspected")
        assert node["provision_state"] == "manageable", node["last_error"]
        shown = bm.json("node", "show", "oob", "--fields", "properties")
        assert {k: shown["properties"][k] for k in ("memory_mb", "local_gb", "cpu_arch")} \
            == {"memory_mb": 98304, "local_gb": 99, "cpu_arch": "x86_64"}
        ports = {p["address"] for p in bm.json("port", "list", "--node", "oob",
                                                 "--fields", "address")}
        assert ports == {"12:44:6a:3b:04:11", "12:44:6a:3b:04:12"}
        stored = bm.server.http("GET", "/v1/nodes/oob/inventory",
                                headers={"X-OpenStack-Ironic-API-Version": "1.81"})
        assert stored.json()["inventory"] == EXPECTED_INVENTORY
        assert {method for method, _ in static.requests()} == {"GET"}
    finally:
        static.stop()


def test_ipmi_node_boots_from_network_and_ends_off(bm, split, ipmi_bmc):
    mac = machine_macs(1, "52:54:00:f2")[0]
    bm.ok("node", "create", "--driver", "ipmi", "--name", "bmc-ipmi",
          *driver_info_args(ipmi_bmc.driver_info()))
    bm.ok("port", "create", mac, "--node", "bmc-ipmi")
    inspect_as_ipa(bm, split, "bmc-ipmi", mac, lambda: ipmi_bmc.state()["power"] == "on")
    state = ipmi_bmc.state()
    assert state["power"] == "off" and "boot network" in state["log"]
    # The client's power command (every target: tests/integration/test_power.py).
    bm.ok("node", "power", "off", "--soft", "bmc-ipmi")
    settled(bm, "bmc-ipmi", "manageable", "power off")
    assert ipmi_bmc.state()["log"][-1] == "shutdown"


@pytest.mark.parametrize("driver", ["redfish", "ipmi"])
def test_wrong_bmc_password_keeps_the_node_enrolled(bm, emulator, ipmi_bmc, driver):
    name = f"bad-{driver}"
    info = emulator.driver_info(redfish_password="wrong-secret") if driver == "redfish" \
        else ipmi_bmc.driver_info(ipmi_password="wrong-secret")
    bm.ok("node", "create", "--driver", driver, "--name", name, *driver_info_args(info))
    bm.ok("node", "manage", name)
    node = wait_for(lambda: (n := show(bm, name))["last_error"] and n, 30,
                    f"{name} refused")
    assert node["provision_state"] == "enroll"
    assert "refused the credentials" in node["last_error"]
    assert "wrong-secret" not in json.dumps(node)
    refused = bm.fails("node", "inspect", name)
    assert 'while it is in state "enroll"' in refused
