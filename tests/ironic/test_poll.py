"""An unmodified Ironic 39 with no message bus at all drives our filter through the poll.

Ironic runs for real (API and conductor in one process, ``rpc_transport = none``, no
notifications) on PostgreSQL with the schema of its own ironic-dbsync; our daemon reads that
database read-only with its defaults (``poll_interval = 1``, ``sync_period = 45``): the
``updated_at`` Ironic's ORM writes, Ironic's connection pool and Ironic's schema (no index on
``updated_at``) are what the poll meets in production.
"""

import time

import pytest

from tests.support import files, services
from tests.support.daemon import start_filter
from tests.support.files import time_until
from tests.support.ironic import Ironic

pytestmark = pytest.mark.slow

MAC = "52:54:00:ef:00:01"
WILDCARD = "unknown_hosts_filter"
ALLOW, DENY = "{}\n", "{},ignore\n"
#: PostgreSQL publishes a connection's table counters at most once a second, else up to
#: 10 s later once the connection is idle (docs/operation.md, "Polling"); the poll adds 1 s.
WORST = 12.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Ironic without notifications and our filter at its defaults, on one database."""
    url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    workdir = tmp_path_factory.mktemp("ironic-poll")
    ironic = Ironic(workdir, url, None)
    daemon = None
    try:
        ironic.create_schema()
        ironic.start()
        hostsdir = workdir / "hostsdir"
        hostsdir.mkdir()
        daemon = start_filter(workdir, url, hostsdir)
        daemon.wait_ready(60)
        yield ironic, hostsdir, daemon
    finally:
        if daemon is not None:
            assert daemon.stop() == 0, daemon.log_text()
        ironic.stop()
        services.drop_database(services.PG_ADMIN_URL, url)


def provision(ironic: Ironic, node: str, target: str) -> float:
    started = time.monotonic()
    resp = ironic.call("PUT", f"/v1/nodes/{node}/states/provision", json={"target": target})
    assert resp.status_code == 202, resp.text
    return started


def test_ironic_without_messages_reaches_the_files_within_seconds(stack):
    ironic, hostsdir, _ = stack
    resp = ironic.call("POST", "/v1/nodes", json={"driver": "fake-hardware",
                                                  "inspect_interface": "agent"})
    assert resp.status_code == 201, resp.text
    node = resp.json()["uuid"]
    started = time.monotonic()
    port = ironic.call("POST", "/v1/ports", json={"address": MAC, "node_uuid": node})
    assert port.status_code == 201, port.text
    time_until(hostsdir / MAC, DENY.format(MAC), timeout=WORST)  # a new port: denied
    delays = {"port created": time.monotonic() - started}
    provision(ironic, node, "manage")
    ironic.wait_state(node, "manageable")
    started = provision(ironic, node, "inspect")
    time_until(hostsdir / MAC, ALLOW.format(MAC), timeout=WORST)
    time_until(hostsdir / WILDCARD, "*:*:*:*:*:*\n", timeout=WORST)
    delays["inspect"] = time.monotonic() - started
    ironic.wait_state(node, "inspect wait")
    started = provision(ironic, node, "abort")
    time_until(hostsdir / MAC, DENY.format(MAC), timeout=WORST)
    time_until(hostsdir / WILDCARD, "*:*:*:*:*:*,ignore\n", timeout=WORST)
    delays["abort"] = time.monotonic() - started
    ironic.wait_state(node, "inspect failed")
    provision(ironic, node, "manage")
    ironic.wait_state(node, "manageable")
    provision(ironic, node, "inspect")
    ironic.wait_state(node, "inspect wait")
    time_until(hostsdir / MAC, ALLOW.format(MAC), timeout=WORST)
    # A node deleted while served (maintenance lets Ironic delete it in any state): its
    # MAC, now of no port, closes with the wildcard (nothing else is on inspection).
    assert ironic.call("PATCH", f"/v1/nodes/{node}", json=[
        {"op": "replace", "path": "/maintenance", "value": True}]).status_code == 200
    started = time.monotonic()
    assert ironic.call("DELETE", f"/v1/nodes/{node}").status_code == 204
    time_until(hostsdir / WILDCARD, "*:*:*:*:*:*,ignore\n", timeout=WORST)
    while files.read(hostsdir / MAC) not in (None, DENY.format(MAC)):
        assert time.monotonic() - started < WORST, files.read(hostsdir / MAC)
        time.sleep(0.05)
    delays["delete"] = time.monotonic() - started
    print("Ironic call to file:", {k: f"{v:.2f} s" for k, v in delays.items()})
