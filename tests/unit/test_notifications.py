"""Ironic notifications as untrusted input, and the follower that applies them (in memory)."""

import json
import logging

import pytest

from pxe_filter import notifications
from pxe_filter.follower import NotificationFollower
from pxe_filter.source import MemorySource
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


def test_a_port_change_names_the_port_s_node():
    port = "11111111-2222-4333-8444-555555555555"
    event = notifications.parse(envelope("baremetal.port.update.end",
                                         {"uuid": port, "node_uuid": NODE, "address": M1}))
    assert (event.node_uuid, event.port_uuid, event.deleted) == (NODE, port, False)


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
                           3: ("inspect wait", "redfish")}, [(M1, 1), (M2, 2)])
    sync = FilterSync(source, str(hostsdir))
    sync.full_sync()
    result = NotificationFollower(source, sync, lambda: sync.supported_interfaces)
    result.reload()
    return result, source, hostsdir


def content(hostsdir, name):
    return (hostsdir / name).read_text()


def node_event(number, timestamp="2026-11-24 23:40:02"):
    return notifications.NodeChanged("baremetal.node.provision_set.success", f"node-{number}",
                                     timestamp, "m")


def test_node_entering_inspection_is_served_and_leaving_denied(follower):
    f, source, hostsdir = follower
    source.nodes[2] = ("inspect wait", "agent")
    assert f.apply(node_event(2))
    assert content(hostsdir, M2) == f"{M2}\n"
    source.nodes[2] = ("manageable", "agent")
    f.apply(node_event(2, "2026-11-24 23:40:03"))
    assert content(hostsdir, M2) == f"{M2},ignore\n"


def port_event(action, node, port, address, timestamp="2026-11-24 23:40:02"):
    return notifications.NodeChanged(f"baremetal.port.{action}.end", f"node-{node}", timestamp,
                                     "m", port, address, action == "delete")


def test_changed_address_closes_the_old_mac(follower):
    f, source, hostsdir = follower
    source.ports = [(M3, 1), (M2, 2)]  # node-1's port now has M3 instead of M1
    # Ironic's update names the new address only; the follower remembers the old one.
    f.apply(port_event("update", 1, f"port-{M1}", M3.upper()))
    assert content(hostsdir, M3) == f"{M3}\n"
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_port_created_and_deleted_on_a_served_node(follower):
    f, source, hostsdir = follower
    source.ports.append((M3, 1))
    f.apply(port_event("create", 1, "p-3", M3))
    assert content(hostsdir, M3) == f"{M3}\n"
    f.apply(port_event("delete", 1, "p-3", M3, "2026-11-24 23:40:03"))
    assert content(hostsdir, M3) == f"{M3},ignore\n"


def test_only_a_node_starting_to_be_served_has_its_ports_read(follower):
    f, source, _ = follower
    reads = []
    original = source.read_node
    source.read_node = lambda uuid, with_ports=False: (reads.append(with_ports),
                                                       original(uuid, with_ports))[1]
    f.apply(node_event(1))  # already served: state read only
    source.nodes[2] = ("inspect wait", "agent")
    f.apply(node_event(2))  # starts being served: its ports are read once
    assert reads == [False, False, True]


def test_unsupported_interface_is_never_served(follower):
    f, source, hostsdir = follower
    source.ports.append((M3, 3))
    f.apply(port_event("create", 3, "p-3", M3))
    f.apply(node_event(3))
    assert content(hostsdir, M3) == f"{M3},ignore\n"


def test_wildcard_follows_the_last_node_leaving_inspection(follower):
    f, source, hostsdir = follower
    assert content(hostsdir, "unknown_hosts_filter") == "*:*:*:*:*:*\n"
    source.nodes[1] = ("manageable", "agent")
    source.nodes[3] = ("manageable", "redfish")
    f.apply(node_event(1))
    assert content(hostsdir, "unknown_hosts_filter") == "*:*:*:*:*:*,ignore\n"
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_deleted_node_closes_its_macs(follower):
    f, source, hostsdir = follower
    del source.nodes[1]
    source.ports = [(M2, 2)]
    f.apply(node_event(1))
    assert content(hostsdir, M1) == f"{M1},ignore\n"


def test_port_event_parsed_with_its_address():
    event = notifications.parse(envelope("baremetal.port.delete.end",
                                         {"uuid": NODE, "node_uuid": NODE,
                                          "address": "52:54:00:00:99:01"}))
    assert (event.port_uuid, event.address, event.deleted) == (NODE, M1, True)


def test_older_notification_changes_nothing(follower):
    f, source, hostsdir = follower
    source.nodes[2] = ("inspect wait", "agent")
    f.apply(node_event(2, "2026-11-24 23:40:05"))
    source.nodes[2] = ("manageable", "agent")
    assert not f.apply(node_event(2, "2026-11-24 23:40:04"))
    assert content(hostsdir, M2) == f"{M2}\n"  # the next newer one or the sync decides
    assert f.counts["ignored: older than one already applied"] == 1


def test_malformed_flood_logs_one_line_per_reason(follower, caplog):
    f, _, hostsdir = follower
    before = {p.name: p.read_text() for p in hostsdir.iterdir()}
    with caplog.at_level(logging.INFO, logger="pxe_filter.follower"):
        for _ in range(1000):
            f.handle(b"garbage")
    assert f.counts["ignored: malformed"] == 1000 and f.counts["received"] == 1000
    assert len([r for r in caplog.records if "ignored" in r.getMessage()]) == 1
    assert {p.name: p.read_text() for p in hostsdir.iterdir()} == before


def test_changed_inspect_interface_closes_the_node(follower):
    f, source, hostsdir = follower
    source.nodes[1] = ("inspect wait", "redfish")  # baremetal.node.update.end
    f.apply(notifications.NodeChanged("baremetal.node.update.end", "node-1",
                                      "2026-11-24 23:40:02", "m"))
    assert content(hostsdir, M1) == f"{M1},ignore\n"
