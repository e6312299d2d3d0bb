"""Ironic notifications as untrusted input: hints of what to read again (in memory)."""

import json
import logging

import pytest

from pxe_filter.common.database import DatabaseError
from pxe_filter.notifications import payloads as notifications
from pxe_filter.notifications.follower import NotificationFollower
from pxe_filter.sync import FilterSync
from tests.support.memory_source import MemorySource, node_uuid

NODE = "0d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
M1, M2, M3 = "52:54:00:00:99:01", "52:54:00:00:99:02", "52:54:00:00:99:03"
P1, P2, P3 = (f"00000000-0000-4000-9000-00000000000{n}" for n in (1, 2, 3))


def envelope(event_type, data, timestamp="2026-11-24 23:40:01.000001", **extra):
    message = {"message_id": "m-1", "publisher_id": "ironic-api.test", "priority": "INFO",
               "event_type": event_type, "timestamp": timestamp,
               "payload": {"ironic_object.name": "X", "ironic_object.data": data}, **extra}
    return json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(message)}).encode()


def test_a_provision_change_names_its_node():
    event = notifications.parse(envelope("baremetal.node.provision_set.success",
                                         {"uuid": NODE.upper(), "provision_state": "x"}))
    assert event == notifications.Hint(nodes=(NODE,))


def test_nothing_but_the_uuids_and_address_is_read():
    # The publisher's clock and a port's node are never used: neither is checked.
    event = notifications.parse(envelope("baremetal.node.create.end", {"uuid": NODE},
                                         timestamp=7))
    assert event == notifications.Hint(nodes=(NODE,))
    port = notifications.parse(envelope("baremetal.port.delete.end", {"uuid": P1}))
    assert port == notifications.Hint(ports=(P1,))


def test_a_port_change_names_the_port_and_its_address():
    port = "11111111-2222-4333-8444-555555555555"
    event = notifications.parse(envelope("baremetal.port.update.end",
                                         {"uuid": port, "node_uuid": NODE, "address": M1}))
    # the address is a MAC to look up, never trusted
    assert event == notifications.Hint(ports=(port,), addresses=(M1,))


@pytest.mark.parametrize("event_type", ["baremetal.node.power_set.end",
                                        "baremetal.port.create.start",
                                        "baremetal.node.maintenance_set.end"])
def test_events_that_cannot_change_the_policy_are_skipped(event_type):
    assert notifications.parse(envelope(event_type, {"uuid": NODE})) is None


@pytest.mark.parametrize(("body", "reason"), [
    (b"\xff not json", "not valid JSON"),
    (b"[1, 2]", "not a JSON object"),
    (json.dumps({"oslo.message": 5}).encode(), "not a JSON string"),
    (envelope("baremetal.node.create.end", "a string"), "no ironic_object.data"),
    (envelope("baremetal.node.create.end", {"uuid": "../../etc/passwd"}), "not a UUID"),
    (json.dumps({"event_type": ["x"]}).encode(), "no event_type"),
    (b"{" * 300_000, "over"),
    (b"[" * 100_000 + b"]" * 100_000, "not"),
])
def test_malformed_messages_say_why(body, reason):
    with pytest.raises(notifications.Malformed, match=reason):
        notifications.parse(body)


@pytest.fixture
def follower(tmp_path):
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    # node-1 on inspection (agent), node-2 manageable, node-3 on inspection with redfish
    source = MemorySource({1: ("inspect wait", "agent"), 2: ("manageable", "agent"),
                           3: ("inspect wait", "redfish")}, [(M1, 1, P1), (M2, 2, P2)])
    sync = FilterSync(source, str(hostsdir))
    sync.full_sync()
    return NotificationFollower(sync), source, hostsdir


def content(hostsdir, name):
    return (hostsdir / name).read_text()


def notify(f, event_type, **data):
    """One notification, then the writer's read of what it hinted at."""
    f.handle(envelope(event_type, data))
    f.sync.reconcile_pending()


def test_port_change_keeps_the_payload_address_as_a_hint_only():
    port = "11111111-2222-4333-8444-555555555555"
    event = notifications.parse(envelope("baremetal.port.update.end",
                                         {"uuid": port, "node_uuid": NODE, "address": "zz"}))
    assert event == notifications.Hint(ports=(port,))


def test_node_entering_inspection_is_served_and_leaving_denied(follower):
    f, source, hostsdir = follower
    source.nodes[2] = ("inspect wait", "agent")
    notify(f, "baremetal.node.provision_set.success", uuid=node_uuid(2))
    assert content(hostsdir, M2) == f"{M2}\n"
    source.nodes[2] = ("manageable", "agent")
    notify(f, "baremetal.node.provision_set.success", uuid=node_uuid(2))
    assert content(hostsdir, M2) == f"{M2},ignore\n"


def test_port_created_and_deleted_on_a_served_node(follower):
    f, source, hostsdir = follower
    source.ports.append((M3, 1, P3))
    notify(f, "baremetal.port.create.end", uuid=P3, node_uuid=node_uuid(1), address=M3)
    assert content(hostsdir, M3) == f"{M3}\n"
    source.ports.pop()
    source.nodes[1] = ("manageable", "agent")
    notify(f, "baremetal.port.delete.end", uuid=P3, node_uuid=node_uuid(1), address=M3)
    # no port has M3 now: the unknown-MAC policy decides (closed: nothing is on inspection)
    assert content(hostsdir, M3) == f"{M3},ignore\n"


def test_forged_notifications_open_nothing(follower):
    f, source, hostsdir = follower
    source.nodes[1] = ("manageable", "agent")
    notify(f, "baremetal.node.provision_set.success", uuid=node_uuid(1))
    before = {p.name: p.read_text() for p in hostsdir.iterdir()}
    # A port the database does not hold, a real port with another address, a node event
    # claiming a state the database does not have.
    notify(f, "baremetal.port.create.end", uuid=P1.replace("1", "9"), node_uuid=NODE,
           address=M3)
    notify(f, "baremetal.port.update.end", uuid=P1, node_uuid=node_uuid(1), address=M3)
    notify(f, "baremetal.node.provision_set.success", uuid=node_uuid(2),
           provision_state="inspect wait")
    after = {p.name: p.read_text() for p in hostsdir.iterdir()}
    assert not any(text.strip() and not text.endswith("ignore\n") for text in after.values())
    assert set(after) - set(before) <= {M3}


def test_unsupported_interface_is_never_served(follower):
    f, source, hostsdir = follower
    port = P3
    source.ports.append((M3, 3, port))
    notify(f, "baremetal.port.create.end", uuid=port, node_uuid=node_uuid(3), address=M3)
    notify(f, "baremetal.node.provision_set.success", uuid=node_uuid(3))
    assert content(hostsdir, M3) == f"{M3},ignore\n"


def test_wildcard_follows_the_last_node_leaving_inspection(follower):
    f, source, hostsdir = follower
    assert content(hostsdir, "unknown_hosts_filter") == "*:*:*:*:*:*\n"
    source.nodes[1] = ("manageable", "agent")
    notify(f, "baremetal.node.provision_set.success", uuid=node_uuid(1))
    assert content(hostsdir, "unknown_hosts_filter") == "*:*:*:*:*:*,ignore\n"
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_deleted_node_asks_for_a_full_sync(follower):
    f, source, hostsdir = follower
    del source.nodes[1]
    source.ports = [(M2, 2, P2)]
    notify(f, "baremetal.node.delete.end", uuid=node_uuid(1))
    assert f.sync.full_sync_due  # only a full read knows a deleted node's MACs
    f.sync.full_sync()
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_database_error_keeps_the_hint_and_retries(follower):
    f, source, hostsdir = follower
    source.nodes[2] = ("inspect wait", "agent")
    real = source.lookup
    source.lookup = lambda *a, **k: (_ for _ in ()).throw(DatabaseError("down"))
    f.handle(envelope("baremetal.node.provision_set.success", {"uuid": node_uuid(2)}))
    with pytest.raises(DatabaseError):
        f.sync.reconcile_pending()
    assert content(hostsdir, M2) == f"{M2},ignore\n" and f.sync.pending
    source.lookup = real
    f.sync.reconcile_pending()  # the same hint, applied once the database answers
    assert content(hostsdir, M2) == f"{M2}\n"


def test_malformed_flood_logs_one_line_per_reason(follower, caplog):
    f, _, hostsdir = follower
    before = {p.name: p.read_text() for p in hostsdir.iterdir()}
    with caplog.at_level(logging.INFO, logger="pxe_filter.notifications.follower"):
        for _ in range(1000):
            f.handle(b"not json")
    assert f.counts["ignored: malformed"] == 1000 and f.counts["received"] == 1000
    assert len([r for r in caplog.records if "ignored" in r.getMessage()]) == 1
    assert {p.name: p.read_text() for p in hostsdir.iterdir()} == before
    assert not f.sync.pending


def test_a_flood_for_unknown_nodes_is_one_read(follower):
    f, source, hostsdir = follower
    calls = []
    real = source.lookup

    def counting(*args, **kwargs):
        calls.append(len(args[1]) if len(args) > 1 else len(kwargs.get("nodes", ())))
        return real(*args, **kwargs)

    source.lookup = counting
    source.nodes[2] = ("inspect wait", "agent")
    for i in range(2000):
        f.handle(envelope("baremetal.node.update.end",
                          {"uuid": f"11111111-0000-4000-8000-{i:012x}"}))
    f.handle(envelope("baremetal.node.provision_set.success", {"uuid": node_uuid(2)}))
    f.sync.reconcile_pending()
    assert calls == [2001]  # one read; the database source splits it per 500 UUIDs
    assert content(hostsdir, M2) == f"{M2}\n"


def test_a_port_added_while_served_is_closed_when_its_node_leaves(follower):
    f, source, hostsdir = follower
    source.ports.append((M3, 1, P3))
    notify(f, "baremetal.port.create.end", uuid=P3, node_uuid=node_uuid(1), address=M3)
    assert content(hostsdir, M3) == f"{M3}\n"
    source.nodes[1] = ("manageable", "agent")
    notify(f, "baremetal.node.provision_set.success", uuid=node_uuid(1))
    # Its node's ports are not scanned for: the MACs served for it are, this one included.
    assert content(hostsdir, M3) == f"{M3},ignore\n"
    assert content(hostsdir, M1) == f"{M1},ignore\n"
