"""Power and boot control through real BMC software: sushy-tools' Redfish emulator and a
pyghmi IPMI BMC, driven by the API all-in-one (its in-process BMC actor).

The emulator's fake systems apply a power change 1-11 s after the request, so the tests
poll the node and the emulator instead of sleeping. One emulator serves the module, with
its own state directory and distinct systems per test.
"""

import time

import pytest
import sqlalchemy as sa

from inspection import metrics
from inspection.db.models import Node, utcnow
from inspection.timeouts import fail_timed_out
from tests.integration.api_helpers import Api, api_conf
from tests.support.bmcs import IpmiBmc, SilentBmc, SushyEmulator, free_port
from tests.support.callbacks import callback_body, machine_macs

#: Systems of the module's emulator: one block per test, 50 for the fleet test.
FLEET = 50
SYSTEMS = FLEET + 10
#: Longest a fake system takes to apply a power change, plus polling slack.
POWER_WAIT = 30
BMC_OPTS = {"poll_interval": 0.2, "call_timeout": 2, "call_retries": 1,
            "retry_interval": 0.1, "power_state_change_timeout": 40, "max_sessions": 8}


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    emu = SushyEmulator(tmp_path_factory.mktemp("sushy"), count=SYSTEMS).start()
    yield emu
    emu.stop()


@pytest.fixture(scope="module")
def ipmi_bmc(tmp_path_factory):
    bmc = IpmiBmc(tmp_path_factory.mktemp("ipmi")).start()
    yield bmc
    bmc.stop()


@pytest.fixture
def make_api(tmp_path):
    apis = []

    def make(**groups) -> Api:
        conf = api_conf(tmp_path, f"sqlite:///{tmp_path}/power.sqlite",
                        bmc={**BMC_OPTS, **groups.pop("bmc", {})}, **groups)
        from inspection.db import migration  # noqa: PLC0415
        from pxe_filter.common.database import create_engine  # noqa: PLC0415

        engine = create_engine(conf.database.connection)
        migration.upgrade(engine)
        engine.dispose()
        api = Api(conf)
        apis.append(api)
        return api

    yield make
    for api in apis:
        api.close()


@pytest.fixture
def api(make_api):
    return make_api()


def wait_for(check, timeout: float = POWER_WAIT, what: str = "condition"):
    """Poll ``check()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.2)


def node(api, ident: str) -> dict:
    resp = api.client.get(f"/v1/nodes/{ident}")
    assert resp.status_code == 200, resp.json
    return resp.json


def wait_state(api, ident: str, state: str, timeout: float = POWER_WAIT, **fields) -> dict:
    """Wait until the node is in ``state`` with ``fields`` (e.g. target_power_state=None)."""
    def reached():
        shown = node(api, ident)
        ok = shown["provision_state"] == state and all(
            shown[k] == v for k, v in fields.items())
        return shown if ok else None
    return wait_for(reached, timeout, f"node {ident} in {state!r} with {fields}")


def enroll(api, name: str, driver: str, driver_info: dict, mac: str | None = None) -> dict:
    created = api.client.post("/v1/nodes", json={"name": name, "driver": driver,
                                                 "driver_info": driver_info})
    assert created.status_code == 201, created.json
    if mac:
        port = api.client.post("/v1/ports", json={"address": mac,
                                                  "node_uuid": created.json["uuid"]})
        assert port.status_code == 201, port.json
    return created.json


def provision(api, ident: str, target: str) -> None:
    # A BMC step holds the node's reservation for a moment: 409, which clients retry (as
    # ironicclient does for Ironic's NodeLocked).
    deadline = time.monotonic() + 10
    while True:
        resp = api.client.put(f"/v1/nodes/{ident}/states/provision", json={"target": target})
        if resp.status_code != 409 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert resp.status_code == 202, resp.json


def test_redfish_manage_inspect_then_off_after_processing(api, emulator):
    mac = machine_macs(1, "52:54:00:e1")[0]
    info = emulator.driver_info(FLEET)
    enroll(api, "rf-1", "redfish", info, mac)
    assert api.client.get("/v1/nodes/rf-1/validate").json["power"] == {
        "result": True, "reason": None}

    provision(api, "rf-1", "manage")
    managed = wait_state(api, "rf-1", "manageable")
    assert managed["power_state"] == "power off" and managed["last_error"] is None

    provision(api, "rf-1", "inspect")
    waiting = wait_state(api, "rf-1", "inspect wait")
    assert waiting["target_power_state"] in ("power on", None)
    assert emulator.boot_target(FLEET) == "Pxe"
    # (The fake systems keep the target only: they show every override as Continuous.)
    wait_for(lambda: emulator.power(FLEET) == "On", what="emulated machine on")
    on = wait_state(api, "rf-1", "inspect wait", power_state="power on",
                    target_power_state=None)
    states = api.client.get("/v1/nodes/rf-1/states").json
    assert (states["power_state"], states["provision_state"]) == ("power on", "inspect wait")
    assert on["driver_internal_info"]["inspector_manage_boot"] is True

    # The ramdisk's data, as IPA posts it.
    assert api.unversioned.post("/v1/continue_inspection",
                           json=callback_body(mac)).status_code == 202
    api.wait_processed()
    done = node(api, "rf-1")
    assert done["provision_state"] == "manageable"
    assert done["target_power_state"] == "power off"
    wait_for(lambda: emulator.power(FLEET) == "Off", what="emulated machine off")
    off = wait_state(api, "rf-1", "manageable", power_state="power off",
                     target_power_state=None)
    assert off["last_error"] is None
    assert "bmc_task" not in off["driver_internal_info"]


def test_redfish_abort_powers_off(api, emulator):
    index = FLEET + 1
    enroll(api, "rf-abort", "redfish", emulator.driver_info(index))
    provision(api, "rf-abort", "manage")
    wait_state(api, "rf-abort", "manageable")
    provision(api, "rf-abort", "inspect")
    wait_state(api, "rf-abort", "inspect wait")
    wait_for(lambda: emulator.power(index) == "On", what="emulated machine on")
    provision(api, "rf-abort", "abort")
    aborted = node(api, "rf-abort")
    assert aborted["provision_state"] == "inspect failed"
    assert aborted["target_power_state"] == "power off"
    wait_for(lambda: emulator.power(index) == "Off", what="emulated machine off")
    wait_state(api, "rf-abort", "inspect failed", power_state="power off",
               target_power_state=None)


def test_power_api_on_reboot_soft_off(api, ipmi_bmc):
    # IPMI: the BMC obeys at once (the emulated Redfish systems take up to 11 s per change).
    enroll(api, "ipmi-power", "ipmi", ipmi_bmc.driver_info())
    provision(api, "ipmi-power", "manage")
    wait_state(api, "ipmi-power", "manageable")

    resp = api.client.put("/v1/nodes/ipmi-power/states/power", json={"target": "power on"})
    assert resp.status_code == 202 and resp.headers["Location"].endswith("/states")
    busy = api.client.put("/v1/nodes/ipmi-power/states/power", json={"target": "power off"})
    assert busy.status_code == 409
    wait_state(api, "ipmi-power", "manageable", power_state="power on",
               target_power_state=None)
    assert ipmi_bmc.state()["power"] == "on"

    assert api.client.put("/v1/nodes/ipmi-power/states/power",
                          json={"target": "rebooting"}).status_code == 202
    wait_state(api, "ipmi-power", "manageable", power_state="power on",
               target_power_state=None)
    assert ipmi_bmc.state()["log"][-1] == "reset"

    # Soft targets came with API 1.27, as in Ironic.
    old = api.client.put("/v1/nodes/ipmi-power/states/power",
                         json={"target": "soft power off"},
                         headers={"X-OpenStack-Ironic-API-Version": "1.20"})
    assert old.status_code == 406
    soft = api.client.put("/v1/nodes/ipmi-power/states/power",
                          json={"target": "soft power off", "timeout": 60},
                          headers={"X-OpenStack-Ironic-API-Version": "1.27"})
    assert soft.status_code == 202
    wait_state(api, "ipmi-power", "manageable", power_state="power off",
               target_power_state=None)
    assert ipmi_bmc.state()["log"][-1] == "shutdown"
    states = api.client.get("/v1/nodes/ipmi-power/states").json
    assert (states["power_state"], states["target_power_state"]) == ("power off", None)
    bad = api.client.put("/v1/nodes/ipmi-power/states/power", json={"target": "sideways"})
    assert bad.status_code == 400


@pytest.mark.parametrize("case", ["wrong credentials", "unreachable", "hanging",
                                  "missing system"])
def test_redfish_bmc_problems_keep_the_node_enrolled(make_api, emulator, case):
    api = make_api()
    silent = SilentBmc()
    try:
        info = {
            "wrong credentials": emulator.driver_info(0, redfish_password="not-the-pw"),
            "unreachable": {"redfish_address": f"http://127.0.0.1:{free_port()}",
                            "redfish_password": "not-the-pw"},
            "hanging": {"redfish_address": silent.url, "redfish_password": "not-the-pw"},
            "missing system": emulator.driver_info(0, redfish_system_id="/redfish/v1/"
                                                                        "Systems/nope"),
        }[case]
        expected = {"wrong credentials": "refused the credentials",
                    "unreachable": "cannot connect", "hanging": "did not answer in time",
                    "missing system": "no such system"}[case]
        before = metrics.BMC_REQUESTS.labels(driver="redfish", outcome="failed")._value.get()
        enroll(api, "rf-bad", "redfish", info)
        started = time.monotonic()
        provision(api, "rf-bad", "manage")
        failed = wait_state(api, "rf-bad", "enroll", timeout=20)
        # Two attempts of at most call_timeout (2 s) each, and the backoff between.
        assert time.monotonic() - started < 10
    finally:
        silent.close()
    assert expected in failed["last_error"], failed["last_error"]
    assert "Failed to verify the BMC" in failed["last_error"]
    assert "not-the-pw" not in failed["last_error"]
    assert failed["target_provision_state"] is None
    after = metrics.BMC_REQUESTS.labels(driver="redfish", outcome="failed")._value.get()
    assert after == before + 1
    kind = {"wrong credentials": "auth", "unreachable": "unreachable", "hanging": "timeout",
            "missing system": "invalid"}[case]
    scraped = api.client.get("/metrics").get_data(as_text=True)
    assert f'ironic_inspection_bmc_failures_total{{driver="redfish",kind="{kind}"}}' in scraped
    assert "ironic_inspection_bmc_sessions_open 0.0" in scraped


def test_fleet_of_50_inspected_with_8_sessions(make_api, emulator):
    # Reads every 2 s per node: the emulator is a single development server.
    api = make_api(api={"processing_threads": 8}, bmc={"poll_interval": 2})
    names = [f"fleet-{i}" for i in range(FLEET)]
    macs = machine_macs(FLEET, "52:54:00:e2")
    for i, name in enumerate(names):
        enroll(api, name, "redfish", emulator.driver_info(i), macs[i])
    started = time.monotonic()
    for name in names:
        provision(api, name, "manage")
    for name in names:
        wait_state(api, name, "manageable")
    print(f"50 nodes verified in {time.monotonic() - started:.1f} s")
    started = time.monotonic()
    for name in names:
        provision(api, name, "inspect")
    for name in names:
        wait_state(api, name, "inspect wait", power_state="power on",
                   target_power_state=None, timeout=60)
    print(f"50 nodes booted and on in {time.monotonic() - started:.1f} s")
    started = time.monotonic()
    assert all(emulator.boot_target(i) == "Pxe" for i in range(FLEET))
    for mac in macs:
        assert api.unversioned.post("/v1/continue_inspection",
                               json=callback_body(mac)).status_code == 202
    api.wait_processed(60)
    for name in names:
        wait_state(api, name, "manageable", power_state="power off",
                   target_power_state=None, timeout=60)
    print(f"50 nodes processed and off in {time.monotonic() - started:.1f} s")
    assert all(emulator.power(i) == "Off" for i in range(FLEET))
    pool = api.context.dispatcher.power.pool
    assert pool.size == 8 and 1 < pool.most_open <= 8


def test_ipmi_manage_inspect_then_off_after_processing(api, ipmi_bmc):
    mac = machine_macs(1, "52:54:00:e3")[0]
    enroll(api, "ipmi-1", "ipmi", ipmi_bmc.driver_info(), mac)
    provision(api, "ipmi-1", "manage")
    assert wait_state(api, "ipmi-1", "manageable")["power_state"] == "power off"
    provision(api, "ipmi-1", "inspect")
    wait_state(api, "ipmi-1", "inspect wait", power_state="power on", target_power_state=None)
    state = ipmi_bmc.state()
    assert state["power"] == "on" and state["boot"] == "network"
    # The BMC is the module's: its log goes on from earlier tests.
    assert state["log"][-2] == "boot network" and state["log"][-1] in ("on", "reset")

    assert api.unversioned.post("/v1/continue_inspection",
                           json=callback_body(mac)).status_code == 202
    api.wait_processed()
    wait_state(api, "ipmi-1", "manageable", power_state="power off", target_power_state=None)
    assert ipmi_bmc.state()["power"] == "off"


def test_ipmi_inspect_wait_timeout_powers_off(api, ipmi_bmc):
    enroll(api, "ipmi-timeout", "ipmi", ipmi_bmc.driver_info())
    provision(api, "ipmi-timeout", "manage")
    wait_state(api, "ipmi-timeout", "manageable")
    provision(api, "ipmi-timeout", "inspect")
    wait_state(api, "ipmi-timeout", "inspect wait", power_state="power on",
               target_power_state=None)
    c = api.context
    later = utcnow().replace(year=utcnow().year + 1)
    assert len(fail_timed_out(c.engine, c.conf, c.notifier, now=later)) == 1
    api.context.dispatcher.wake_power()
    failed = wait_state(api, "ipmi-timeout", "inspect failed", power_state="power off",
                        target_power_state=None)
    assert "Timeout reached" in failed["last_error"]
    assert ipmi_bmc.state()["power"] == "off"


def test_power_off_can_be_disabled(make_api, ipmi_bmc):
    api = make_api(inspector={"power_off": False})
    enroll(api, "ipmi-keep", "ipmi", ipmi_bmc.driver_info())
    provision(api, "ipmi-keep", "manage")
    wait_state(api, "ipmi-keep", "manageable")
    provision(api, "ipmi-keep", "inspect")
    wait_state(api, "ipmi-keep", "inspect wait", power_state="power on",
               target_power_state=None)
    provision(api, "ipmi-keep", "abort")
    assert node(api, "ipmi-keep")["target_power_state"] is None
    assert ipmi_bmc.state()["power"] == "on"


@pytest.mark.parametrize("case", ["wrong credentials", "hanging"])
def test_ipmi_bmc_problems_keep_the_node_enrolled(make_api, ipmi_bmc, case):
    # pyghmi gives up on a silent BMC after about 5 s by itself: no retry here.
    api = make_api(bmc={"call_retries": 0})
    silent = SilentBmc()
    try:
        info = ipmi_bmc.driver_info(ipmi_password="not-the-pw") if case == "wrong credentials" \
            else {"ipmi_address": "127.0.0.1", "ipmi_port": silent.udp_port,
                  "ipmi_password": "not-the-pw"}
        enroll(api, "ipmi-bad", "ipmi", info)
        provision(api, "ipmi-bad", "manage")
        failed = wait_state(api, "ipmi-bad", "enroll", timeout=30)
    finally:
        silent.close()
    expected = "refused the credentials" if case == "wrong credentials" \
        else "did not answer in time"
    assert expected in failed["last_error"], failed["last_error"]
    assert "not-the-pw" not in failed["last_error"]


def test_unmanaged_nodes_are_inspected_as_before(api):
    enroll(api, "lab-1", "fake-hardware", {"ipmi_address": "192.0.2.9"})
    provision(api, "lab-1", "manage")
    assert node(api, "lab-1")["provision_state"] == "manageable"
    provision(api, "lab-1", "inspect")
    waiting = node(api, "lab-1")
    assert waiting["provision_state"] == "inspect wait"
    assert waiting["target_power_state"] is None
    validation = api.client.get("/v1/nodes/lab-1/validate").json
    assert validation["power"]["result"] is True and validation["deploy"]["result"] is None
    # fake-hardware's power is a no-op that reports what was asked, as in Ironic.
    assert api.client.put("/v1/nodes/lab-1/states/power",
                          json={"target": "power on"}).status_code == 202
    assert node(api, "lab-1")["power_state"] == "power on"

    enroll(api, "no-address", "redfish", {})
    assert api.client.get("/v1/nodes/no-address/validate").json["power"] == {
        "result": False, "reason": "Missing the following redfish properties in node's "
                                   "driver_info: redfish_address"}
    refused = api.client.put("/v1/nodes/no-address/states/power", json={"target": "power on"})
    assert refused.status_code == 400


def test_inspecting_without_a_bmc_actor_times_out(api, ipmi_bmc):
    enroll(api, "ipmi-stuck", "ipmi", ipmi_bmc.driver_info())
    provision(api, "ipmi-stuck", "manage")
    wait_state(api, "ipmi-stuck", "manageable")
    c = api.context
    c.dispatcher.power.stop()  # as in split mode with no worker running
    provision(api, "ipmi-stuck", "inspect")
    assert node(api, "ipmi-stuck")["provision_state"] == "inspecting"
    later = utcnow().replace(year=utcnow().year + 1)
    assert len(fail_timed_out(c.engine, c.conf, c.notifier, now=later)) == 1
    failed = node(api, "ipmi-stuck")
    assert failed["provision_state"] == "inspect failed"
    assert "is an ironic-inspection-worker running?" in failed["last_error"]


def _set_ironic_fields(api, node_uuid: str, **values) -> None:
    with api.context.engine.begin() as conn:  # Ironic's fields, not served by this API
        conn.execute(sa.update(Node).where(Node.uuid == node_uuid).values(**values))


def test_boot_mode_reaches_the_bmc(api, emulator):
    index = FLEET + 3
    created = enroll(api, "rf-bios", "redfish", emulator.driver_info(index))
    _set_ironic_fields(api, created["uuid"], boot_mode="bios")
    provision(api, "rf-bios", "manage")
    wait_state(api, "rf-bios", "manageable")
    provision(api, "rf-bios", "inspect")
    wait_state(api, "rf-bios", "inspect wait")
    boot = emulator.system(index)["Boot"]
    assert (boot["BootSourceOverrideTarget"], boot["BootSourceOverrideMode"]) == (
        "Pxe", "Legacy")


def test_http_boot_over_ipmi_fails_the_inspection_clearly(api, ipmi_bmc):
    # (The emulated Redfish systems record UEFI HTTP boot without a URL as Pxe.)
    created = enroll(api, "ipmi-http", "ipmi", ipmi_bmc.driver_info())
    _set_ironic_fields(api, created["uuid"], boot_interface="http")
    provision(api, "ipmi-http", "manage")
    wait_state(api, "ipmi-http", "manageable")
    provision(api, "ipmi-http", "inspect")
    failed = wait_state(api, "ipmi-http", "inspect failed")
    assert "IPMI cannot set UEFI HTTP boot: use the redfish hardware type" in \
        failed["last_error"]
    assert failed["target_power_state"] is None
