"""BMC work recorded on nodes: which nodes are managed, what is due, what ends an
inspection, and the errors that reach last_error."""

import time

import pytest

from inspection.db.models import Node
from inspection.errors import BadRequest
from inspection.power import drivers, tasks
from inspection.power.errors import BmcError
from inspection.power.ipmi import _port
from inspection.power.ipmi import translate as ipmi_translate
from tests.integration.node_factory import make_conf


@pytest.mark.parametrize(("driver", "info", "managed"), [
    ("redfish", {"redfish_address": "https://bmc"}, True),
    ("ipmi", {"ipmi_address": "10.0.0.1"}, True),
    ("redfish", {}, False),
    ("ipmi", {"redfish_address": "https://bmc"}, False),
    ("fake-hardware", {"ipmi_address": "10.0.0.1"}, False),
    ("manual-management", {"redfish_address": "https://bmc"}, False),
    (None, None, False),
])
def test_managed_nodes(driver, info, managed):
    assert drivers.manages_boot(driver, info) is managed


@pytest.mark.parametrize(("interface", "device"), [
    (None, "pxe"), ("ipxe", "pxe"), ("pxe", "pxe"), ("http", "uefihttp"),
    ("http-ipxe", "uefihttp"), ("redfish-https", "uefihttp")])
def test_boot_device_follows_the_boot_interface(interface, device):
    assert drivers.boot_device(interface) == device


@pytest.mark.parametrize(("column", "properties", "mode"), [
    ("uefi", {}, "uefi"), (None, {"capabilities": "boot_mode:bios,cpu_vt:true"}, "bios"),
    ("bios", {"capabilities": "boot_mode:uefi"}, "bios"), (None, {}, None),
    (None, {"capabilities": "boot_mode:floppy"}, None)])
def test_boot_mode_from_the_node_or_its_capability(column, properties, mode):
    assert drivers.boot_mode(column, properties) == mode


def _node(**columns) -> Node:
    columns.setdefault("driver", "redfish")
    columns.setdefault("driver_info", {"redfish_address": "https://bmc"})
    columns.setdefault("driver_internal_info", {})
    return Node(uuid="n-1", **columns)


@pytest.mark.parametrize(("power_off", "disable", "expected"), [
    ("true", False, "power off"), ("true", True, "rebooting"), ("false", False, None)])
def test_end_of_inspection_powers_off_what_was_booted(tmp_path, power_off, disable, expected):
    conf = make_conf(tmp_path, inspector={"power_off": power_off})
    node = _node(provision_state="manageable", disable_power_off=disable)
    assert tasks.start_inspection(node, conf) is True
    node.provision_state = "inspecting"
    assert tasks.pending(node) == {"action": "boot"}
    tasks.step_done(node)
    tasks.end_inspection(node)
    assert (tasks.pending(node) or {}).get("action") == expected
    assert node.target_power_state == (drivers.END_STATE[expected] if expected else None)
    assert tasks.MANAGED_KEY not in node.driver_internal_info


def test_out_of_band_inspection_reads_and_never_powers(tmp_path):
    conf = make_conf(tmp_path, inspector={"power_off": "true"})
    node = _node(provision_state="manageable", inspect_interface="redfish")
    assert tasks.start_inspection(node, conf) is True
    node.provision_state = "inspecting"
    assert tasks.pending(node) == {"action": "inspect"}
    assert tasks.due(node)
    tasks.step_done(node)
    tasks.end_inspection(node)
    assert tasks.pending(node) is None and node.target_power_state is None


@pytest.mark.parametrize(("driver", "info", "lacking"), [
    ("ipmi", {"ipmi_address": "10.0.0.1"}, "driver 'ipmi'"),
    ("redfish", {"redfish_username": "admin"}, "lacking redfish_address"),
    ("fake-hardware", {}, "driver 'fake-hardware'")])
def test_out_of_band_inspection_needs_a_redfish_bmc(tmp_path, driver, info, lacking):
    node = _node(driver=driver, driver_info=info, provision_state="manageable",
                 inspect_interface="redfish")
    with pytest.raises(BadRequest, match=lacking):
        tasks.start_inspection(node, make_conf(tmp_path))
    assert tasks.pending(node) is None


@pytest.mark.parametrize(("driver", "info", "key"), [
    ("redfish", {"redfish_address": "https://BMC.example.com:8443/redfish"},
     "redfish:bmc.example.com:8443"),
    ("redfish", {"redfish_address": "10.0.0.1"}, "redfish:10.0.0.1"),
    ("ipmi", {"ipmi_address": "10.0.0.1", "ipmi_port": 6230}, "ipmi:10.0.0.1:6230")])
def test_nodes_sharing_a_bmc_share_its_key(driver, info, key):
    assert drivers.bmc_key(driver, info) == key


def test_unmanaged_inspections_never_power_off(tmp_path):
    node = _node(driver="fake-hardware", provision_state="manageable")
    assert tasks.start_inspection(node, make_conf(tmp_path)) is False
    tasks.end_inspection(node)
    assert tasks.pending(node) is None and node.target_power_state is None


def test_nodes_without_a_task_of_ours_are_never_due():
    # A database shared with Ironic: its conductors drive nodes in these states.
    for state in ("verifying", "inspecting"):
        assert not tasks.due(_node(provision_state=state))
    assert not tasks.due(_node(provision_state="manageable", target_power_state="power on"))
    junk = _node(provision_state="manageable", driver_internal_info={"bmc_task": "x"})
    assert not tasks.due(junk)
    # A verification task on a node that left verifying is stale.
    stale = _node(provision_state="manageable",
                  driver_internal_info={"bmc_task": {"action": "verify"}})
    assert not tasks.due(stale)


def test_a_sent_change_is_checked_at_intervals_until_its_deadline():
    node = _node(provision_state="manageable")
    tasks.request(node, "soft power off", timeout=300)
    assert tasks.due(node) and node.target_power_state == "power off"
    tasks.sent(node, "soft power off", timeout=60, interval=5)
    task = tasks.pending(node)
    assert task["deadline"] - time.time() > 290  # the request's own timeout wins
    assert not tasks.due(node) and tasks.due(node, now=time.time() + 6)
    tasks.finish(node, "power off")
    assert (node.power_state, node.target_power_state, tasks.pending(node)) == (
        "power off", None, None)


@pytest.mark.parametrize(("message", "kind", "retryable"), [
    ("Incorrect password provided", "auth", False),
    ("Unauthorized name", "auth", False),
    ("timeout", "timeout", True),
    ("None", "timeout", True),
    ("Unknown error 0xcc", "error", True),
])
def test_ipmi_errors(message, kind, retryable):
    error = ipmi_translate(Exception(message), "10.0.0.1:623")
    assert (error.kind, error.retryable) == (kind, retryable)
    assert "10.0.0.1:623" in str(error)


def test_ipmi_port_is_validated():
    assert _port(None) == 623 and _port("6230") == 6230
    with pytest.raises(BmcError, match="not a port number"):
        _port("../etc")


def test_open_client_refuses_incomplete_driver_info():
    with pytest.raises(BmcError, match="driver_info lacks redfish_address") as exc:
        drivers.open_client("redfish", {"redfish_password": "secret"}, 1)
    assert not exc.value.retryable and "secret" not in str(exc.value)
    with pytest.raises(BmcError, match="no BMC this service can drive"):
        drivers.open_client("fake-hardware", {}, 1)
