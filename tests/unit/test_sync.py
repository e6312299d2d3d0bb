"""FilterSync on a real SQLite database: counts, broadcasts, and broadcast-vs-sync ordering."""

import logging
import os
import threading
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from inspection.db.models import Node, Port
from pxe_filter.common.database import DatabaseError
from pxe_filter.hostsdir import RESERVE, WILDCARD
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import FilterSync

M1, M2, M3 = "52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:03"


def add_node(engine, state, macs, interface="agent"):
    with engine.begin() as conn:
        node_id = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state=state, inspect_interface=interface,
            conductor_group="")).inserted_primary_key[0]
        for mac in macs:
            conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), address=mac,
                                                node_id=node_id))
    return node_id


def set_state(engine, node_id, state):
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.id == node_id).values(provision_state=state))


def content(path, name):
    return (path / name).read_text()


def test_full_sync_counts_and_files(engine, hosts):
    add_node(engine, "inspect wait", [M1])
    add_node(engine, "active", [M2])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    result = sync.full_sync()
    assert (result.allowed, result.denied, result.written, result.failed) == (1, 1, 3, 0)
    assert result.unknown_allowed and result.duration > 0
    assert content(hosts, M1) == f"{M1}\n"
    assert content(hosts, M2) == f"{M2},ignore\n"
    assert content(hosts, WILDCARD) == "*:*:*:*:*:*\n"
    again = sync.full_sync()
    assert again.written == 0 and again.reread == 0


def test_discovery_and_deny_unknown_options(engine, hosts):
    add_node(engine, "active", [M1])
    sync = FilterSync(DatabaseSource(engine), str(hosts), discovery_enabled=True)
    assert sync.full_sync().unknown_allowed
    sync.configure(supported_interfaces=["agent"], discovery_enabled=True,
                   deny_unknown_macs=True)
    assert not sync.full_sync().unknown_allowed
    assert content(hosts, WILDCARD) == "*:*:*:*:*:*,ignore\n"


def test_broadcast_validates_and_applies_valid_macs(engine, hosts, caplog):
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    bad = ["52:54:00:00:00", "52-54-00-00-00-0g", "../x", f"{M3}\n", 42, None,
           "52:54:00:00:00:01:02", ""]
    result = sync.apply_broadcast(allow=[M1.upper(), *bad], deny=[M2, M1])
    assert result.rejected == len(bad)
    assert (result.allowed, result.denied) == (0, 2)  # M1 in both lists: denied
    assert content(hosts, M1) == f"{M1},ignore\n"
    assert content(hosts, M2) == f"{M2},ignore\n"
    assert sorted(os.listdir(hosts)) == sorted([M1, M2, WILDCARD, RESERVE])
    assert "rejected 8 invalid entr(y/ies), e.g." in caplog.text
    result = sync.apply_broadcast(allow="52:54:00:00:00:03", deny={"not": "a list"})
    assert result.rejected == 2 and result.written == 0
    assert sync.apply_broadcast(allow=[M1]).written == 1
    assert content(hosts, M1) == f"{M1}\n"


def test_broadcast_repairs_other_spellings_too(engine, hosts):
    (hosts / "52-54-00-00-00-01").write_text("52-54-00-00-00-01\n")
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    sync.apply_broadcast(allow=[M1])
    assert content(hosts, "52-54-00-00-00-01") == f"{M1}\n"
    sync.apply_broadcast(deny=[M1])
    assert content(hosts, "52-54-00-00-00-01") == f"{M1},ignore\n"


def test_broadcast_during_slow_database_read_wins_and_is_not_blocked(engine, hosts):
    node = add_node(engine, "active", [M1])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    applied = threading.Event()

    def broadcast_mid_read(statement):
        # Runs inside the sync's database read: the conductor has just moved the node to
        # inspection and broadcast it, after this sync's snapshot began.
        if "FROM ports" in statement and not applied.is_set():
            worker = threading.Thread(target=lambda: sync.apply_broadcast(allow=[M1]))
            worker.start()
            worker.join(timeout=5)
            if not worker.is_alive():  # else: blocked by the database read
                applied.set()

    def trace(dbapi_conn, _record):
        dbapi_conn.set_trace_callback(broadcast_mid_read)  # sqlite3's statement hook

    event.listen(engine, "connect", trace)
    engine.dispose()  # new connections get the hook
    try:
        result = sync.full_sync()
    finally:
        event.remove(engine, "connect", trace)
        engine.dispose()
    assert applied.is_set()
    # The snapshot said "deny"; the newer broadcast said "allow": the broadcast stays.
    assert content(hosts, M1) == f"{M1}\n"
    assert result.kept_broadcasts == 1
    # A later snapshot is newer than the broadcast: the database decides again.
    set_state(engine, node, "inspect wait")
    assert sync.full_sync().kept_broadcasts == 0
    assert content(hosts, M1) == f"{M1}\n"
    set_state(engine, node, "available")
    sync.full_sync()
    assert content(hosts, M1) == f"{M1},ignore\n"


def test_database_error_leaves_files_untouched(engine, hosts):
    add_node(engine, "inspect wait", [M1])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    before = {n: (hosts / n).read_bytes() for n in os.listdir(hosts)}
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE ports RENAME TO ports_away"))
    with pytest.raises(DatabaseError, match="ports"):
        sync.full_sync()
    assert {n: (hosts / n).read_bytes() for n in os.listdir(hosts)} == before


def test_stop_flag_interrupts_a_large_sync_cleanly(engine, hosts):
    add_node(engine, "active", [f"52:54:00:00:01:{i:02x}" for i in range(200)])
    stop = threading.Event()
    written = []

    def should_stop():
        written.append(1)
        if len(written) > 20:
            stop.set()
        return stop.is_set()

    sync = FilterSync(DatabaseSource(engine), str(hosts), should_stop=should_stop)
    result = sync.full_sync()
    assert result.interrupted and result.written == 20
    assert [n for n in os.listdir(hosts) if n.startswith(".")] == [RESERVE]


def test_reread_after_sighup_repairs_in_place_edits_without_blocking_broadcasts(engine,
                                                                                  hosts):
    add_node(engine, "inspect wait", [M1])
    add_node(engine, "active", [M2, M3])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    with open(hosts / M1, "r+") as f:  # same inode: only a content re-read sees it
        f.write(f"{M1},ignore\n")
    assert sync.full_sync().written == 0  # a plain sync trusts the inode
    done = threading.Event()
    real_read = sync.hostsdir.read_state

    def read_state(name, mac):
        # Mid re-read (SIGHUP): a broadcast from another thread must get through now.
        if not done.is_set():
            worker = threading.Thread(target=lambda: sync.apply_broadcast(allow=[M2]))
            worker.start()
            worker.join(timeout=5)
            if not worker.is_alive():
                done.set()
        return real_read(name, mac)

    sync.hostsdir.read_state = read_state
    sync.reread_files()
    result = sync.full_sync()
    assert done.is_set()
    assert content(hosts, M1) == f"{M1}\n" and content(hosts, M2) == f"{M2}\n"
    assert result.written == 1 and result.reread >= 4 and result.kept_broadcasts == 1
    sync.hostsdir.read_state = real_read
    assert sync.full_sync().reread == 0  # the re-read was once, not every sync now


def test_a_flood_of_invalid_entries_is_one_log_line(engine, hosts, caplog):
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    flood = [f"bogus-{i}" for i in range(100_000)]
    with caplog.at_level(logging.WARNING, logger="pxe_filter.sync"):
        result = sync.apply_broadcast(allow=flood, deny=[M1])
    assert result.rejected == 100_000 and content(hosts, M1) == f"{M1},ignore\n"
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and lines[0].startswith("Broadcast: rejected 100000 invalid")


def test_invalid_database_addresses_are_one_log_line_per_sync(engine, hosts, caplog):
    add_node(engine, "active", ["not-a-mac-1", "not-a-mac-2", "zz:zz:zz:zz:zz:zz", M1])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    with caplog.at_level(logging.WARNING, logger="pxe_filter.policy"):
        result = sync.full_sync()
    assert result.invalid == 3
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "3 port(s) with an invalid address" in lines[0], lines


def test_served_nodes_after_a_sync_come_from_its_snapshot(engine, hosts):
    served = add_node(engine, "inspect wait", [M1, M2])
    add_node(engine, "inspect wait", [M3], interface="redfish")  # not served
    add_node(engine, "active", ["52:54:00:00:00:04"])
    source = DatabaseSource(engine)
    sync = FilterSync(source, str(hosts))
    sync.full_sync()
    source.served_nodes(["agent"])  # the first call reads: snapshots keep UUIDs from now on
    sync.full_sync()
    statements = []

    def record(_conn, _cursor, sql, *_args):
        statements.append(sql)

    event.listen(engine, "before_cursor_execute", record)
    try:
        from_snapshot = source.served_nodes(["agent"])
        assert statements == []  # the ports are not read twice per sync
        set_state(engine, served, "manageable")
        assert source.served_nodes(["agent"]) == []  # later calls read the database
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert [(row.provision_state, sorted(a for _, a in row.ports)) for row in from_snapshot] \
        == [("inspect wait", [M1, M2])]
    assert all(port for row in from_snapshot for port, _ in row.ports)


def test_port_addresses_are_interned_and_odd_values_passed_on():
    # One string per MAC whatever the driver hands back; None dropped (the policy ignores
    # it), a non-string kept for the policy to reject.
    from pxe_filter.source import _interned  # noqa: PLC0415

    first, second = "".join(["52:54:00:00:00:", "01"]), "".join(["52:54:00:00:00:", "01"])
    assert first is not second
    assert _interned([first])[0] is _interned([second])[0]
    assert _interned([first, None, 5]) == [first, 5]
