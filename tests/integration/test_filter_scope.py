"""One filter per provisioning network on real databases and a real message bus.

The full sync is scoped in SQL on SQLite, PostgreSQL and MariaDB; a scoped daemon never opens a
node outside its scope, whether a conductor broadcasts an allow for it or Ironic notifies that
it is on inspection.
"""

import json
import signal
import subprocess
import uuid

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter import broadcast, policy
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from pxe_filter.hostsdir import WILDCARD
from pxe_filter.policy import Settings
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import FilterSync
from tests.integration.test_notification_follower import Bus
from tests.support.daemon import filter_command, start_filter
from tests.support.files import read, time_until

IN1, IN2, OUT1, OUT2, OUT3, UNSHARDED = (f"52:54:00:5c:00:0{n}" for n in range(1, 7))
ALLOW, DENY = "{}\n", "{},ignore\n"


def add(url: str, state: str, macs: list[str], group: str, shard: str | None = None
        ) -> tuple[str, list[str]]:
    """A node (agent inspection) of ``group``/``shard`` and its ports; their UUIDs."""
    node, ports = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in macs]
    engine = create_engine(url)
    with engine.begin() as conn:
        node_id = conn.execute(sa.insert(Node).values(
            uuid=node, provision_state=state, inspect_interface="agent",
            conductor_group=group, shard=shard)).inserted_primary_key[0]
        conn.execute(sa.insert(Port), [{"uuid": port, "address": mac, "node_id": node_id}
                                       for port, mac in zip(ports, macs, strict=True)])
    engine.dispose()
    return node, ports


def on_disk(hostsdir) -> dict[str, str]:
    return {p.name: p.read_text() for p in hostsdir.iterdir() if not p.name.startswith(".")}


@pytest.mark.parametrize("mode", ["deny", "wildcard"])
def test_full_sync_is_scoped_in_sql(db_url, tmp_path, mode):
    """rack1/s1 is served; everything else is outside (other group, other shard, no shard)."""
    add(db_url, "inspect wait", [IN1], "rack1", "s1")
    add(db_url, "active", [IN2], "rack1", "s1")
    add(db_url, "inspect wait", [OUT1], "rack2", "s1")
    add(db_url, "inspecting", [OUT2], "", "s1")
    add(db_url, "inspect wait", [OUT3], "rack1", "s2")
    add(db_url, "inspect wait", [UNSHARDED], "rack1")
    scope = policy.Scope.from_options(["Rack1"], ["s1"], mode)
    hosts = tmp_path / "hosts"
    hosts.mkdir()
    engine = create_engine(db_url, read_only=True)
    try:
        source = DatabaseSource(engine)
        snap = source.read_snapshot(["agent"], scope)
        outside = {OUT1, OUT2, OUT3, UNSHARDED}
        # Rows read: every port under deny, only the in-scope nodes' ports under wildcard.
        assert snap.on_inspection == {IN1}
        assert snap.others == ({IN2} | outside if mode == "deny" else {IN2})
        result = FilterSync(source, str(hosts), Settings(scope=scope)).full_sync()
        found = on_disk(hosts)
        assert found.pop(IN1) == ALLOW.format(IN1) and found.pop(IN2) == DENY.format(IN2)
        assert found.pop(WILDCARD) == "*:*:*:*:*:*\n"  # an in-scope node is on inspection
        assert found == ({mac: DENY.format(mac) for mac in outside} if mode == "deny" else {})
        assert (result.allowed, result.denied) == (1, 5 if mode == "deny" else 1)
        found = source.lookup([IN1, OUT1, UNSHARDED], supported_interfaces=["agent"],
                              scope=scope)
        assert {mac: (v.conductor_group, v.shard) for mac, v in found.ports.items()} == {
            IN1: ("rack1", "s1"), OUT1: ("rack2", "s1"), UNSHARDED: ("rack1", None)}
        assert found.any_served
        unsharded = policy.Scope.from_options(["rack1"], ["<none>"])
        assert source.read_snapshot(["agent"], unsharded).on_inspection == {UNSHARDED}
        assert not source.lookup(supported_interfaces=["agent"],
                                 scope=policy.Scope.from_options(["rack9"], [])).any_served
    finally:
        engine.dispose()


@pytest.fixture
def scoped_daemon(tmp_path, sqlite_url, rabbit_url):
    """A daemon serving conductor group rack1 only, following broadcasts and notifications."""
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, sqlite_url, hostsdir, transport_url=rabbit_url,
                          name="scoped", extra_conf={
                              "pxe_filter": {"conductor_groups": "rack1", "sync_period": 3600,
                                             "ironic_notifications": True},
                              "oslo_messaging_notifications": {"transport_url": rabbit_url}})
    bus = Bus(rabbit_url)
    transport = messaging.get_transport(rabbit_url)
    try:
        daemon.wait_ready(30)
        daemon.wait_log("Listening for Ironic's notifications", timeout=20)
        yield sqlite_url, hostsdir, daemon, bus, transport
    finally:
        transport.cleanup()
        bus.close()
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0, daemon.log_text()


def test_scoped_daemon_never_opens_an_out_of_scope_node(scoped_daemon):
    url, hostsdir, daemon, bus, transport = scoped_daemon
    assert "Serving conductor groups rack1; other nodes' ports: denied" in daemon.log_text()
    # Out of scope and on inspection: Ironic notifies it, and a conductor broadcasts it.
    out, _ = add(url, "inspect wait", [OUT1], "rack2")
    bus.send("baremetal.node.provision_set.success", {"uuid": out})
    broadcast.broadcast(transport, allow=[OUT1, IN2])  # IN2: a MAC of no port
    # The database says: outside the scope (denied), and no port (the wildcard decides).
    time_until(hostsdir / OUT1, DENY.format(OUT1), timeout=10)
    daemon.wait_log("Database read for")  # (with the change poll's hints, maybe in one)
    # In scope, notified after the other: once it is open, that one was applied too.
    inside, _ = add(url, "inspect wait", [IN1], "rack1")
    bus.send("baremetal.node.provision_set.success", {"uuid": inside})
    time_until(hostsdir / IN1, ALLOW.format(IN1), timeout=10)
    add(url, "manageable", [OUT2], "rack1")
    broadcast.broadcast(transport, allow=[OUT2])  # in scope, but the database says no
    time_until(hostsdir / OUT2, DENY.format(OUT2), timeout=10)
    assert read(hostsdir / OUT1) == DENY.format(OUT1)
    assert read(hostsdir / IN2) is None
    status = subprocess.run([*filter_command(), "status", "--config-file",
                             str(daemon.config_path), "--format", "json"],
                            capture_output=True, text=True, timeout=30)
    assert json.loads(status.stdout)["scope"].startswith("conductor groups rack1")


def test_out_of_scope_node_alone_on_inspection_keeps_unknown_macs_denied(scoped_daemon):
    url, hostsdir, daemon, bus, _ = scoped_daemon
    out, _ = add(url, "inspect wait", [OUT3], "rack2")
    bus.send("baremetal.node.provision_set.success", {"uuid": out})
    # A port notification of an in-scope node that is not served: its deny file says the
    # batch before it was applied.
    node, (port,) = add(url, "manageable", [UNSHARDED], "rack1")
    bus.send("baremetal.port.create.end", {"uuid": port, "node_uuid": node,
                                           "address": UNSHARDED})
    time_until(hostsdir / UNSHARDED, DENY.format(UNSHARDED), timeout=10)
    # out of scope: never allowed (no file yet, or the deny a sync or a poll writes)
    assert read(hostsdir / OUT3) in (None, DENY.format(OUT3))
    assert read(hostsdir / WILDCARD) == "*:*:*:*:*:*,ignore\n"
    start = len(daemon.log_text())
    daemon.signal(signal.SIGHUP)  # a full sync: the same verdict
    daemon.wait_log("Full sync", timeout=20, start=start)
    assert read(hostsdir / OUT3) == DENY.format(OUT3)
    assert read(hostsdir / WILDCARD) == "*:*:*:*:*:*,ignore\n"


def test_sighup_applies_a_new_scope(scoped_daemon):
    url, hostsdir, daemon, _, _ = scoped_daemon
    add(url, "inspect wait", [OUT1], "rack2")
    add(url, "inspect wait", [IN1], "rack1")
    config = daemon.config_path
    text = config.read_text()
    assert "conductor_groups = rack1" in text
    config.write_text(text.replace("conductor_groups = rack1", "conductor_groups = rack2"))
    start = len(daemon.log_text())
    daemon.signal(signal.SIGHUP)
    daemon.wait_log("Serving conductor groups rack2", timeout=20, start=start)
    time_until(hostsdir / OUT1, ALLOW.format(OUT1), timeout=20)
    time_until(hostsdir / IN1, DENY.format(IN1), timeout=20)
