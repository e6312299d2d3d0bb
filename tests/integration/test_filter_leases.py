"""dnsmasq's own answers are watched: a real client takes leases from the project's rendered
dnsmasq configuration, dnsmasq reports them to the filter, and a lease to a MAC the database
denies is logged at CRITICAL and closed; a foreign line in a MAC-named file stops being
served; ``explain`` says what dnsmasq will do and why."""

import json
import signal
import subprocess
import time

import pytest

from tests.support import services
from tests.support.daemon import filter_command, start_filter
from tests.support.dhcp_fixtures import dnsmasq_sections
from tests.support.filter_nodes import add_node, set_state

pytestmark = pytest.mark.netns
pytest_plugins = ["tests.support.dhcp_fixtures"]

LEASED, CONTROL, FOREIGN = "52:54:00:ab:00:01", "52:54:00:ab:00:02", "52:54:00:ab:00:09"


@pytest.fixture
def leased_iface(netns_pair):
    """A client interface whose MAC is LEASED, for busybox udhcpc."""
    if subprocess.run(["busybox", "udhcpc", "--help"], capture_output=True).returncode > 1:
        services.unavailable("busybox udhcpc", "busybox not found (Debian: busybox)")
    for iface in netns_pair.client_ifs:
        if netns_pair.client_mac(iface) == LEASED:
            return iface
    return netns_pair.add_client_interface(LEASED)


def udhcpc(pair, iface: str) -> bool:
    """A real DHCP exchange (DISCOVER, OFFER, REQUEST, ACK); True if a lease was obtained."""
    argv = pair.exec_argv(pair.client, ["busybox", "udhcpc", "-i", iface, "-n", "-q", "-f",
                                        "-t", "2", "-T", "1", "-A", "1", "-s", "/bin/true"])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    return "obtained" in proc.stdout + proc.stderr


def explain(daemon, mac: str) -> dict:
    proc = subprocess.run([*filter_command(), "explain", mac, "--config-file",
                           str(daemon.config_path), "--format", "json"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_lease_to_a_denied_mac_is_reported_and_closed(  # noqa: PLR0917 - fixtures
        tmp_path, db, hostsdir, netns_pair, leased_iface, dhcp_client, kill_pidfile_dnsmasq):
    node = add_node(db, "inspect wait", [LEASED])
    add_node(db, "inspect wait", [CONTROL])
    # pidfile: dnsmasq keeps serving while the filter is stopped, as it does in production
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, "pidfile", sync_period=3600)
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections, name="first")
    try:
        daemon.wait_ready(20)
        assert udhcpc(netns_pair, leased_iface)  # allowed: a lease, reported, no alarm
        time.sleep(2)
        assert "dnsmasq served a MAC" not in daemon.log_text()
        answer = explain(daemon, LEASED.replace(":", "-"))
        assert (answer["decision"], answer["provision_state"]) == ("allow", "inspect wait")
        assert answer["file"] == LEASED and answer["daemon_running"] is True
        assert "is in inspect wait with inspect_interface agent" in answer["reason"]
    finally:
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0, daemon.log_text()
    # The filter is down; the node leaves inspection; its file still allows: a lease.
    set_state(db, node, "manageable")
    answer = explain(daemon, LEASED)
    assert answer["decision"] == "allow" and answer["last_dhcp"] is not None
    assert "nothing corrects it while ironic-pxe-filter is not running" in answer["reason"]
    assert udhcpc(netns_pair, leased_iface)
    restarted = start_filter(tmp_path, db, hostsdir, extra_conf=sections, name="second")
    try:
        restarted.wait_ready(20)
        ready = time.monotonic()
        log = restarted.wait_log("dnsmasq served a MAC the database denies", timeout=10)
        took = time.monotonic() - ready
        line = next(x for x in log.splitlines() if "dnsmasq served a MAC" in x)
        assert " CRITICAL " in line and LEASED in line and "manageable" in line
        restarted.wait_log(f"dnsmasq reloaded after a lease to denied MAC {LEASED}")
        assert (hostsdir / LEASED).read_text() == f"{LEASED},ignore\n"
        assert not udhcpc(netns_pair, leased_iface)
        dhcp_client.await_offer(CONTROL, offered=True, within=3)
        answer = explain(restarted, LEASED)
        assert answer["decision"] == "deny" and answer["node"] is not None
        assert "is in manageable" in answer["reason"]
        status = subprocess.run([*filter_command(), "status", "--config-file",
                                 str(restarted.config_path), "--format", "json"],
                                capture_output=True, text=True, timeout=30)
        assert f"served denied MAC {LEASED}" in json.loads(status.stdout)["errors"]["last"]
    finally:
        restarted.signal(signal.SIGTERM)
        assert restarted.stop() == 0, restarted.log_text()
    print(f"lease to a denied MAC reported and closed {took:.1f} s after the filter started")
    unknown = explain(restarted, "52:54:00:ab:00:77")
    assert unknown["node"] is None and unknown["decision"] == "allow"  # CONTROL inspects
    assert unknown["reason"] == ("no port has this MAC: unknown MACs are allowed (a node is "
                                 "on inspection)") and unknown["file"] is None


def test_a_foreign_line_in_a_mac_file_stops_being_served(
        tmp_path, db, hostsdir, netns_pair, dhcp_client):
    add_node(db, "manageable", [LEASED])
    add_node(db, "inspect wait", [CONTROL])
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, "commands",
                                deny_unknown_macs=True, sync_period=3600)
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections)
    try:
        daemon.wait_ready(20)
        dhcp_client.await_offer(CONTROL, offered=True, within=3)
        assert dhcp_client.discover(LEASED, control=CONTROL) is None
        # Someone writes the denied MAC's allow line into the file of a MAC no port has.
        (hostsdir / FOREIGN).write_text(f"{LEASED}\n")
        start = time.monotonic()
        daemon.wait_log("dnsmasq reloaded after foreign content in", timeout=3)
        took = dhcp_client.await_offer(LEASED, offered=False, within=3, control=CONTROL)
        took = time.monotonic() - start
        assert took < 3, took
        # and it stays refused
        for _ in range(5):
            assert dhcp_client.discover(LEASED, control=CONTROL) is None
        assert (hostsdir / FOREIGN).read_text() == f"{FOREIGN},ignore\n"
    finally:
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0, daemon.log_text()
    print(f"foreign line stopped being served {took:.2f} s after it was written")
