"""An unmodified Ironic 39 drives our filter through its versioned notifications.

Ironic runs for real (API and conductor in one process, fake hardware, the agent inspect
interface) on a database made by its own ironic-dbsync; our daemon reads that database
read-only and listens to Ironic's notifications, with the periodic sync far out of reach:
every change below reaches the hostsdir through a notification or not at all.
"""

import json
import re
import signal
import subprocess
import time

import pytest

from tests.support import files, services
from tests.support.daemon import filter_command, start_filter
from tests.support.files import time_until
from tests.support.ironic import Ironic

pytestmark = pytest.mark.slow
pytest_plugins = ["tests.support.dhcp_fixtures"]

M1, M2, M3 = "52:54:00:ee:00:01", "52:54:00:ee:00:02", "52:54:00:ee:00:03"
BOOTING = "52:54:00:ee:00:04"  # the real-DHCP case's machine
WILDCARD = "unknown_hosts_filter"
ALLOW, DENY = "{}\n", "{},ignore\n"
FAR = 3600


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def ironic_db(request, tmp_path_factory):
    """A database for Ironic: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("ironic-db") / "ironic.sqlite"
        yield f"sqlite:///{path}"
        return
    url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    yield url
    services.drop_database(services.PG_ADMIN_URL, url)


@pytest.fixture(scope="module")
def stack(ironic_db, tmp_path_factory):
    """Ironic and our filter (notifications on) on one database and one vhost."""
    vhost = services.create_vhost()
    workdir = tmp_path_factory.mktemp("ironic")
    ironic = Ironic(workdir, ironic_db, vhost)
    daemon = None
    try:
        ironic.create_schema()
        ironic.start()
        hostsdir = workdir / "hostsdir"
        hostsdir.mkdir()
        daemon = start_filter(workdir, ironic_db, hostsdir, extra_conf={
            "pxe_filter": {"sync_period": FAR, "ironic_notifications": True},
            "oslo_messaging_notifications": {"transport_url": vhost}})
        daemon.wait_ready(60)
        deadline = time.monotonic() + 20
        while "Listening for Ironic's notifications" not in daemon.log_text():
            assert time.monotonic() < deadline, daemon.log_text()
            time.sleep(0.1)
        yield ironic, hostsdir, daemon
    finally:
        if daemon is not None:
            daemon.signal(signal.SIGTERM)
            code = daemon.stop()
            assert code == 0, daemon.log_text()
        ironic.stop()
        services.delete_vhost(vhost)


def new_node(ironic: Ironic, *macs: str) -> str:
    resp = ironic.call("POST", "/v1/nodes", json={"driver": "fake-hardware",
                                                  "inspect_interface": "agent"})
    assert resp.status_code == 201, resp.text
    node = resp.json()["uuid"]
    for mac in macs:
        port = ironic.call("POST", "/v1/ports", json={"address": mac, "node_uuid": node})
        assert port.status_code == 201, port.text
    return node


def provision(ironic: Ironic, node: str, target: str) -> None:
    resp = ironic.call("PUT", f"/v1/nodes/{node}/states/provision", json={"target": target})
    assert resp.status_code == 202, resp.text


def test_inspection_opens_and_abort_closes_within_a_second(stack):
    ironic, hostsdir, daemon = stack
    node = new_node(ironic, M1)
    time_until(hostsdir / M1, DENY.format(M1))  # a port of an enrolled node: denied at once
    provision(ironic, node, "manage")
    ironic.wait_state(node, "manageable")
    provision(ironic, node, "inspect")
    opened = time_until(hostsdir / M1, ALLOW.format(M1))
    time_until(hostsdir / WILDCARD, "*:*:*:*:*:*\n")  # a node on inspection: unknown served
    ironic.wait_state(node, "inspect wait")
    provision(ironic, node, "abort")
    closed = time_until(hostsdir / M1, DENY.format(M1))
    time_until(hostsdir / WILDCARD, "*:*:*:*:*:*,ignore\n")
    ironic.wait_state(node, "inspect failed")
    print(f"Ironic call to file: open {opened * 1000:.0f} ms, close {closed * 1000:.0f} ms")
    assert re.search(r"Database read for \d+ MAC\(s\), [1-9]\d* node\(s\)", daemon.log_text())


def test_port_changes_during_inspection(stack):
    ironic, hostsdir, daemon = stack
    node = new_node(ironic, M2)
    provision(ironic, node, "manage")
    ironic.wait_state(node, "manageable")
    provision(ironic, node, "inspect")
    ironic.wait_state(node, "inspect wait")
    time_until(hostsdir / M2, ALLOW.format(M2))
    port = ironic.call("GET", f"/v1/ports?address={M2}").json()["ports"][0]["uuid"]
    # Ironic's update payload has the new address only. The old one has no port now: it
    # follows the unknown-MAC policy, which serves it while a node is on inspection (as
    # the wildcard serves any MAC then), like the full sync that the change asks for.
    resp = ironic.call("PATCH", f"/v1/ports/{port}",
                       json=[{"op": "replace", "path": "/address", "value": M3}])
    assert resp.status_code == 200, resp.text
    time_until(hostsdir / M3, ALLOW.format(M3))
    assert files.read(hostsdir / M2) == ALLOW.format(M2)
    assert files.read(hostsdir / WILDCARD) == "*:*:*:*:*:*\n"
    assert ironic.call("DELETE", f"/v1/ports/{port}").status_code == 204
    daemon.wait_log(f"{M3}", timeout=5)  # the delete's hint (its address) was read
    added = ironic.call("POST", "/v1/ports", json={"address": M2, "node_uuid": node})
    assert added.status_code == 201, added.text
    time_until(hostsdir / M2, ALLOW.format(M2))
    provision(ironic, node, "abort")
    time_until(hostsdir / M2, DENY.format(M2))
    ironic.wait_state(node, "inspect failed")
    provision(ironic, node, "manage")  # Ironic deletes no node in 'inspect failed'
    ironic.wait_state(node, "manageable")
    time_until(hostsdir / M2, DENY.format(M2))
    mark = len(daemon.log_text())
    assert ironic.call("DELETE", f"/v1/nodes/{node}").status_code == 204
    # The delete notification reaches the daemon and is applied (a re-read: node and port
    # are gone). M2, now of no port, must not be opened by it: nothing is on inspection.
    daemon.wait_log(f"'{node}'", timeout=5, start=mark)
    assert files.read(hostsdir / M2) == DENY.format(M2)
    assert files.read(hostsdir / WILDCARD) == "*:*:*:*:*:*,ignore\n"


def test_status_counts_notifications(stack):
    _, _, daemon = stack
    out = subprocess.run([*filter_command(), "status", "--config-file", str(daemon.config_path),
                          "--format", "json"], capture_output=True, text=True, timeout=30)
    counts = json.loads(out.stdout)["notifications"]
    # Every node and port change above was applied; power and .start events were not
    # relevant (and counted as such).
    assert counts["applied"] >= 10 and counts["not relevant"] >= 1, counts
    assert counts["received"] >= counts["applied"] + counts["not relevant"]


@pytest.mark.netns
def test_dnsmasq_answers_only_while_ironic_inspects(stack, dnsmasq_factory, dhcp_client):
    ironic, hostsdir, _ = stack
    node = new_node(ironic, BOOTING)
    provision(ironic, node, "manage")
    ironic.wait_state(node, "manageable")
    dnsmasq_factory(hostsdir)
    assert dhcp_client.discover(BOOTING) is None  # a port of a manageable node
    provision(ironic, node, "inspect")
    opened = dhcp_client.await_offer(BOOTING, offered=True, within=2.0)
    ironic.wait_state(node, "inspect wait")
    provision(ironic, node, "abort")
    closed = dhcp_client.await_offer(BOOTING, offered=False, within=2.0)
    ironic.wait_state(node, "inspect failed")
    print(f"Ironic call to DHCP: offer after {opened * 1000:.0f} ms, none after "
          f"{closed * 1000:.0f} ms")
