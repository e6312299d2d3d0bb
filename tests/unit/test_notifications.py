"""Ironic notifications as untrusted input, and the follower that applies them (in memory)."""

import json
import logging
import threading

import pytest

from pxe_filter.common.database import DatabaseError
from pxe_filter.memory_source import MemorySource
from pxe_filter.notifications import payloads as notifications
from pxe_filter.notifications.follower import NotificationFollower
from pxe_filter.sync import FilterSync

NODE = "0d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
M1, M2, M3 = "52:54:00:00:99:01", "52:54:00:00:99:02", "52:54:00:00:99:03"


def envelope(event_type, data, timestamp="2026-11-24 23:40:01.000001", **extra):
    message = {"message_id": "m-1", "publisher_id": "ironic-api.test", "priority": "INFO",
               "event_type": event_type, "timestamp": timestamp,
               "payload": {"ironic_object.name": "X", "ironic_object.data": data}, **extra}
    return json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(message)}).encode()


def test_a_provision_change_names_its_node():
    event = notifications.parse(envelope("baremetal.node.provision_set.success",
                                         {"uuid": NODE.upper(), "provision_state": "x"}))
    assert (event.node_uuid, event.timestamp) == (NODE, "2026-11-24 23:40:01.000001")


def test_a_port_change_names_the_port_and_keeps_no_address():
    port = "11111111-2222-4333-8444-555555555555"
    event = notifications.parse(envelope("baremetal.port.update.end",
                                         {"uuid": port, "node_uuid": NODE, "address": M1}))
    assert (event.node_uuid, event.port_uuid, event.deleted) == (NODE, port, False)
    assert not hasattr(event, "address")  # the payload's address is never used


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
    (envelope("baremetal.node.create.end", {"uuid": NODE}, timestamp=7), "timestamp"),
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
                           3: ("inspect wait", "redfish")}, [(M1, 1, "p-1"), (M2, 2, "p-2")])
    sync = FilterSync(source, str(hostsdir))
    sync.full_sync()
    result = NotificationFollower(source, sync, lambda: sync.supported_interfaces)
    result.reload()
    return result, source, hostsdir


def content(hostsdir, name):
    return (hostsdir / name).read_text()


def node(number):
    return {f"node-{number}"}


def test_node_entering_inspection_is_served_and_leaving_denied(follower):
    f, source, hostsdir = follower
    source.nodes[2] = ("inspect wait", "agent")
    f.apply(nodes=node(2))
    assert content(hostsdir, M2) == f"{M2}\n"
    source.nodes[2] = ("manageable", "agent")
    f.apply(nodes=node(2))
    assert content(hostsdir, M2) == f"{M2},ignore\n"


def test_changed_address_closes_the_old_mac(follower):
    f, source, hostsdir = follower
    source.ports = [(M3, 1, "p-1"), (M2, 2, "p-2")]  # node-1's port now has M3, not M1
    f.apply(ports={"p-1"})
    assert content(hostsdir, M3) == f"{M3}\n"
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_port_created_and_deleted_on_a_served_node(follower):
    f, source, hostsdir = follower
    source.ports.append((M3, 1, "p-3"))
    f.apply(ports={"p-3"})
    assert content(hostsdir, M3) == f"{M3}\n"
    source.ports.pop()
    f.apply(ports={"p-3"})
    assert content(hostsdir, M3) == f"{M3},ignore\n"


def test_forged_port_notification_opens_nothing(follower):
    f, source, hostsdir = follower
    source.nodes[1] = ("manageable", "agent")
    f.apply(nodes=node(1))  # nothing served any more: unknown MACs denied
    before = {p.name: p.read_text() for p in hostsdir.iterdir()}
    port = "11111111-2222-4333-8444-555555555555"
    # A port the database does not hold, then a real port with another address.
    for data in ({"uuid": port, "node_uuid": NODE, "address": M3},
                 {"uuid": "22222222-2222-4333-8444-555555555555", "node_uuid": NODE,
                  "address": M3}):
        f.handle(envelope("baremetal.port.create.end", data))
    source.ports.append((M2, 1, "22222222-2222-4333-8444-555555555555"))
    assert f.flush()
    after = {p.name: p.read_text() for p in hostsdir.iterdir()}
    assert after == before
    assert not any(text.strip() and not text.endswith("ignore\n") for text in after.values())


def test_ports_moved_in_reverse_order_leave_no_old_mac_served(follower):
    f, source, hostsdir = follower
    # p-1 moved M1 -> M3, then a new port p-9 on manageable node-2 took M1: the second
    # notification arrives first. Both are read from the database, whatever the order.
    source.ports = [(M3, 1, "p-1"), (M2, 2, "p-2"), (M1, 2, "p-9")]
    f.apply(ports={"p-9"})
    f.apply(ports={"p-1"})
    assert content(hostsdir, M1) == f"{M1},ignore\n"
    assert content(hostsdir, M3) == f"{M3}\n"


def test_a_mac_moved_to_another_served_port_stays_allowed(follower):
    f, source, hostsdir = follower
    source.ports = [(M3, 1, "p-1"), (M1, 1, "p-7"), (M2, 2, "p-2")]
    f.apply(ports={"p-7"})  # p-7 took M1 first
    f.apply(ports={"p-1"})  # p-1 lost M1 (already remembered on p-7): M1 stays
    assert content(hostsdir, M1) == f"{M1}\n"
    assert content(hostsdir, M3) == f"{M3}\n"


def test_only_a_node_starting_to_be_served_has_its_ports_read(follower):
    f, source, _ = follower
    reads = []
    original = source.read_node
    source.read_node = lambda uuid, with_ports=False, scope=None: (
        reads.append(with_ports), original(uuid, with_ports))[1]
    f.apply(nodes=node(1))  # already served: state read only, in a batch
    source.nodes[2] = ("inspect wait", "agent")
    f.apply(nodes=node(2))  # starts being served: its ports are read once
    assert reads == [False, False, True]


def test_unsupported_interface_is_never_served(follower):
    f, source, hostsdir = follower
    source.ports.append((M3, 3, "p-3"))
    f.apply(ports={"p-3"})
    f.apply(nodes=node(3))
    assert content(hostsdir, M3) == f"{M3},ignore\n"


def test_wildcard_follows_the_last_node_leaving_inspection(follower):
    f, source, hostsdir = follower
    assert content(hostsdir, "unknown_hosts_filter") == "*:*:*:*:*:*\n"
    source.nodes[1] = ("manageable", "agent")
    source.nodes[3] = ("manageable", "redfish")
    f.apply(nodes=node(1))
    assert content(hostsdir, "unknown_hosts_filter") == "*:*:*:*:*:*,ignore\n"
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_deleted_node_closes_its_macs(follower):
    f, source, hostsdir = follower
    del source.nodes[1]
    source.ports = [(M2, 2, "p-2")]
    f.apply(nodes=node(1))
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_publisher_timestamps_change_nothing(follower):
    f, source, hostsdir = follower
    uuid = "0d1c2b3a-4e5f-4a6b-8c7d-000000000002"
    source.nodes = {1: source.nodes[1], 2: ("inspect wait", "agent")}
    source.read_node = _by_uuid(source.read_node, uuid, "node-2")
    source.read_nodes = _by_uuids(source.read_nodes, uuid, "node-2")
    f.handle(envelope("baremetal.node.provision_set.success", {"uuid": uuid},
                      timestamp="9999-12-31 23:59:59.999999"))
    assert f.flush()
    assert content(hostsdir, M2) == f"{M2}\n"
    # The real deny that follows carries an older stamp: it applies all the same.
    source.nodes[2] = ("manageable", "agent")
    f.handle(envelope("baremetal.node.provision_set.success", {"uuid": uuid},
                      timestamp="2026-11-24 23:40:04"))
    assert f.flush()
    assert content(hostsdir, M2) == f"{M2},ignore\n"


def _by_uuid(read_node, uuid, name):
    return lambda u, with_ports=False, scope=None: read_node(name if u == uuid else u,
                                                             with_ports)


def _by_uuids(read_nodes, uuid, name):
    def read(uuids, scope=None):
        rows = read_nodes({name if u == uuid else u for u in uuids})
        return {(uuid if u == name else u): row for u, row in rows.items()}
    return read


def test_database_error_keeps_the_notification_queued_and_retries(follower):
    f, source, hostsdir = follower
    source.nodes[2] = ("inspect wait", "agent")
    original = source.read_ports
    def fail(uuids, scope=None):
        raise DatabaseError("connection refused")
    source.read_ports = fail
    f.handle(envelope("baremetal.port.update.end",
                      {"uuid": "33333333-2222-4333-8444-555555555555", "node_uuid": NODE,
                       "address": M2}))
    assert not f.flush()
    assert f.counts["retried: database error"] == 1
    assert content(hostsdir, M2) == f"{M2},ignore\n"
    source.read_ports = original
    source.ports.append((M2, 2, "33333333-2222-4333-8444-555555555555"))
    assert f.flush()  # the same notification, applied once the database answers
    assert content(hostsdir, M2) == f"{M2}\n"


def test_malformed_flood_logs_one_line_per_reason(follower, caplog):
    f, _, hostsdir = follower
    before = {p.name: p.read_text() for p in hostsdir.iterdir()}
    with caplog.at_level(logging.INFO, logger="pxe_filter.notifications.follower"):
        for _ in range(1000):
            f.handle(b"garbage")
    assert f.counts["ignored: malformed"] == 1000 and f.counts["received"] == 1000
    assert len([r for r in caplog.records if "ignored" in r.getMessage()]) == 1
    assert {p.name: p.read_text() for p in hostsdir.iterdir()} == before


def test_a_flood_for_unknown_nodes_is_read_in_batches(follower):
    f, source, hostsdir = follower
    queries = []
    original = source.read_nodes
    for i in range(20000):
        f.handle(envelope("baremetal.node.update.end",
                          {"uuid": f"0d1c2b3a-4e5f-4a6b-8c7d-1{i:011x}"}))
    source.nodes[2] = ("inspect wait", "agent")
    f.handle(envelope("baremetal.node.provision_set.success",
                      {"uuid": "0d1c2b3a-4e5f-4a6b-8c7d-000000000002"}))
    source.read_node = _by_uuid(source.read_node, "0d1c2b3a-4e5f-4a6b-8c7d-000000000002",
                                "node-2")
    source.read_nodes = _by_uuids(lambda uuids, scope=None: (queries.append(len(uuids)),
                                                 original(uuids))[1],
                                  "0d1c2b3a-4e5f-4a6b-8c7d-000000000002", "node-2")
    assert f.flush()
    assert queries == [20001]  # one call; the database source splits it per 500 UUIDs
    assert content(hostsdir, M2) == f"{M2}\n"


def test_changed_inspect_interface_closes_the_node(follower):
    f, source, hostsdir = follower
    source.nodes[1] = ("inspect wait", "redfish")  # baremetal.node.update.end
    f.apply(nodes=node(1))
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_reload_does_not_forget_a_node_served_meanwhile(follower):
    f, source, hostsdir = follower
    started = threading.Event()
    release = threading.Event()
    original = source.served_nodes

    def slow_served(interfaces, scope):
        rows = original(interfaces, scope)  # read before node-2 starts being served
        started.set()
        release.wait(5)
        return rows

    source.served_nodes = slow_served
    reloading = threading.Thread(target=f.reload)
    reloading.start()
    started.wait(5)
    source.nodes[2] = ("inspect wait", "agent")
    applying = threading.Thread(target=f.apply, kwargs={"nodes": node(2)})
    applying.start()
    release.set()
    reloading.join(5)
    applying.join(5)
    source.served_nodes = original
    assert content(hostsdir, M2) == f"{M2}\n"
    source.nodes[2] = ("manageable", "agent")
    f.apply(nodes=node(2))  # only closed if the follower still knows node-2 is served
    assert content(hostsdir, M2) == f"{M2},ignore\n"
