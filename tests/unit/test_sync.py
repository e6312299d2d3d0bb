"""FilterSync on a real SQLite database: counts, hints, and the database as the only truth."""

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
from pxe_filter.policy import Settings
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import LEASE, FilterSync

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
    sync = FilterSync(DatabaseSource(engine), str(hosts), Settings(discovery_enabled=True))
    assert sync.full_sync().unknown_allowed
    sync.settings = Settings(discovery_enabled=True, deny_unknown_macs=True)
    assert not sync.full_sync().unknown_allowed
    assert content(hosts, WILDCARD) == "*:*:*:*:*:*,ignore\n"


def hint_and_read(sync, **kwargs):
    result = sync.hint(**kwargs)
    sync.reconcile_pending()
    return result


def test_hint_validates_denies_at_once_and_allows_only_what_the_database_says(engine, hosts,
                                                                              caplog):
    on_inspection = add_node(engine, "inspect wait", [M3])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    set_state(engine, on_inspection, "manageable")  # the database changed, no one said so
    bad = ["52:54:00:00:00", "52-54-00-00-00-0g", "../x", f"{M3}\n", 42, None,
           "52:54:00:00:00:01:02", ""]
    result = sync.hint(allow=[M1.upper(), M3, *bad], deny=[M2, M1])
    assert result.rejected == len(bad)
    assert (result.allowed, result.denied) == (1, 2)  # M1 in both lists: denied
    assert content(hosts, M1) == f"{M1},ignore\n"  # denies are written before any read
    assert content(hosts, M2) == f"{M2},ignore\n"
    assert content(hosts, M3) == f"{M3}\n"  # the allow waits for the database
    assert "rejected 8 invalid entr(y/ies), e.g." in caplog.text
    read = sync.reconcile_pending()
    # The database knows no port of M1 and M2: the unknown-MAC policy (denied: nothing is
    # on inspection now) decides; M3's node is manageable: the allow is refused.
    assert content(hosts, M3) == f"{M3},ignore\n"
    assert content(hosts, M1) == f"{M1},ignore\n" and content(hosts, WILDCARD).endswith(
        ",ignore\n")
    assert (read.allowed, read.denied, read.unknown) == (0, 1, 2)
    assert sorted(os.listdir(hosts)) == sorted([M1, M2, M3, WILDCARD, RESERVE])
    result = sync.hint(allow="52:54:00:00:00:03", deny={"not": "a list"})
    assert result.rejected == 2 and result.written == 0 and not sync.pending
    set_state(engine, on_inspection, "inspect wait")
    hint_and_read(sync, allow=[M3])
    assert content(hosts, M3) == f"{M3}\n"


def test_allow_and_deny_in_any_order_end_as_the_database_says(engine, hosts):
    """Casts applied by a thread pool come in any order: the database decides."""
    nodes = {f"52:54:00:00:02:{i:02x}": add_node(engine, "manageable",
                                                [f"52:54:00:00:02:{i:02x}"])
             for i in range(120)}
    control = add_node(engine, "manageable", [M1])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    # The positive control: committed after the sync, its allow must come through the storm.
    set_state(engine, control, "inspect wait")
    threads = [threading.Thread(target=sync.hint, kwargs={"allow": [M1]})]
    for i, mac in enumerate(nodes):
        # half the pairs arrive deny-first: what a pool of 64 handlers does
        pair = [{"allow": [mac]}, {"deny": [mac]}]
        for kwargs in (pair if i % 2 else pair[::-1]):
            threads.append(threading.Thread(target=sync.hint, kwargs=kwargs))
    for thread in threads:
        thread.start()
    reader = threading.Thread(target=lambda: [sync.reconcile_pending() for _ in range(5)])
    reader.start()
    for thread in [*threads, reader]:
        thread.join(10)
    sync.reconcile_pending()
    assert content(hosts, M1) == f"{M1}\n"
    assert all(content(hosts, mac) == f"{mac},ignore\n" for mac in nodes)


def test_other_spellings_are_removed_as_foreign_files(engine, hosts):
    add_node(engine, "inspect wait", [M1])
    (hosts / "52-54-00-00-00-01").write_text("52-54-00-00-00-01\n")
    (hosts / "5254.0000.0001").write_text(f"{M1},ignore\n")
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    reports = []
    sync.after_foreign = reports.append  # the daemon reloads dnsmasq (or stops it)
    sync.full_sync()
    assert sorted(reports[0].removed) == sorted(["52-54-00-00-00-01", "5254.0000.0001"])
    assert reports[0].reload_needed
    assert sorted(os.listdir(hosts)) == sorted([M1, WILDCARD, RESERVE])
    assert content(hosts, M1) == f"{M1}\n"
    sync.hint(deny=[M1])
    assert content(hosts, M1) == f"{M1},ignore\n" and len(reports) == 1


def test_a_deny_during_a_database_read_is_never_undone_by_it(engine, hosts):
    node = add_node(engine, "inspect wait", [M1])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    assert content(hosts, M1) == f"{M1}\n"
    applied = threading.Event()

    def deny_mid_read(statement):
        # Runs inside the sync's database read, which still sees the node on inspection:
        # an abort was committed and cast after this read began.
        if "FROM ports" in statement and not applied.is_set():
            worker = threading.Thread(target=lambda: sync.hint(deny=[M1]))
            worker.start()
            worker.join(timeout=5)
            if not worker.is_alive():  # else: blocked by the database read
                applied.set()

    def trace(dbapi_conn, _record):
        dbapi_conn.set_trace_callback(deny_mid_read)  # sqlite3's statement hook

    event.listen(engine, "connect", trace)
    engine.dispose()  # new connections get the hook
    try:
        result = sync.full_sync()
    finally:
        event.remove(engine, "connect", trace)
        engine.dispose()
    assert applied.is_set()
    assert content(hosts, M1) == f"{M1},ignore\n"  # the older read did not reopen it
    assert result.fenced == 1 and sync.pending  # and the MAC is read again
    sync.reconcile_pending()  # the database still says inspect wait: it decides
    assert content(hosts, M1) == f"{M1}\n"
    set_state(engine, node, "available")
    sync.full_sync()
    assert content(hosts, M1) == f"{M1},ignore\n" and sync.full_sync().fenced == 0


def test_with_the_database_down_denies_close_and_allows_wait(engine, hosts):
    add_node(engine, "inspect wait", [M1])
    add_node(engine, "manageable", [M2])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE ports RENAME TO ports_away"))
    sync.hint(allow=[M2], deny=[M1])
    assert content(hosts, M1) == f"{M1},ignore\n"
    with pytest.raises(DatabaseError):
        sync.reconcile_pending()
    assert content(hosts, M2) == f"{M2},ignore\n" and sync.pending  # kept, not applied
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE ports_away RENAME TO ports"))
    sync.reconcile_pending()
    assert content(hosts, M1) == f"{M1}\n" and content(hosts, M2) == f"{M2},ignore\n"


def test_leased_macs_are_read_at_once_and_a_lease_deny_rewrites_the_file(engine, hosts):
    node = add_node(engine, "inspect wait", [M1])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    set_state(engine, node, "manageable")  # no one said so; dnsmasq then leases M1
    read = sync.reconcile_pending({M1, M3})  # no hint queued: the leased MACs still are read
    assert read is not None and set(read.ports) == {M1} and read.ports[M1].node_uuid
    assert content(hosts, M1) == f"{M1},ignore\n" and sync.desired.decision(M1) is False
    assert (read.denied, read.unknown) == (1, 1) and not sync.pending
    before = os.stat(hosts / M1).st_ino
    result = sync.hint(deny=[M1], origin=LEASE, rewrite=True)  # already denies: rewritten
    assert result.written == 1 and os.stat(hosts / M1).st_ino != before and sync.pending


def test_a_deleted_node_asks_for_a_full_sync(engine, hosts):
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    hint_and_read(sync, nodes=[str(uuid.uuid4())])
    assert sync.full_sync_due
    sync.full_sync()
    assert not sync.full_sync_due


def test_foreign_content_in_a_mac_file_asks_for_a_reload(engine, hosts):
    add_node(engine, "manageable", [M1])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    reported = []  # what each batch of writes tells the fail-safe
    sync.after_writes = lambda report, full: reported.append(report.foreign_content)
    sync.full_sync()
    assert reported == [None]
    (hosts / M3).write_text(f"{M1}\n")  # the line of a denied MAC in another MAC's file
    (hosts / M2).write_text(f"{M2}\n")  # a MAC's own line: a rewrite supersedes it
    sync.full_sync()
    assert content(hosts, M3) == f"{M3},ignore\n" and reported[-1] == M3
    # Whatever a foreign write left, even the file's own line in another form: reloaded too.
    (hosts / "new").write_text(f"{M3},IGNORE")
    (hosts / "new").rename(hosts / M3)  # replaced, not edited in place: a new inode
    sync.full_sync()
    assert content(hosts, M3) == f"{M3},ignore\n" and reported[-1] == M3
    sync.full_sync()
    assert reported[-1] is None  # said once: the file is the filter's own again


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


def test_reread_after_sighup_repairs_in_place_edits_without_blocking_denies(engine, hosts):
    add_node(engine, "inspect wait", [M1])
    add_node(engine, "active", [M2, M3])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    with open(hosts / M1, "r+") as f:  # same inode: only a content re-read sees it
        f.write(f"{M1},ignore\n")
    assert sync.full_sync().written == 0  # a plain sync trusts the inode
    done = threading.Event()
    real_read = sync.hostsdir.read_state

    def read_state(name):
        # Mid re-read (SIGHUP): a deny from another thread must get through now.
        if not done.is_set():
            worker = threading.Thread(target=lambda: sync.hint(deny=[M2]))
            worker.start()
            worker.join(timeout=5)
            if not worker.is_alive():
                done.set()
        return real_read(name)

    sync.hostsdir.read_state = read_state
    sync.reread_files()
    result = sync.full_sync()
    assert done.is_set()
    assert content(hosts, M1) == f"{M1}\n" and content(hosts, M2) == f"{M2},ignore\n"
    assert result.written == 1 and result.reread >= 4
    sync.hostsdir.read_state = real_read
    assert sync.full_sync().reread == 0  # the re-read was once, not every sync now


def test_a_flood_of_invalid_entries_is_one_log_line(engine, hosts, caplog):
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    flood = [f"bogus-{i}" for i in range(100_000)]
    with caplog.at_level(logging.WARNING, logger="pxe_filter.sync"):
        result = sync.hint(allow=flood, deny=[M1])
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


def test_lookup_reads_ports_by_mac_port_and_node(engine, hosts):
    served = add_node(engine, "inspect wait", [M1, M2])
    add_node(engine, "active", [M3])
    source = DatabaseSource(engine)
    with engine.connect() as conn:
        node_uuid = conn.execute(sa.select(Node.uuid).where(Node.id == served)).scalar()
        port_uuid = conn.execute(sa.select(Port.uuid).where(Port.address == M3)).scalar()
    found = source.lookup([M1, "52:54:00:00:00:09"], supported_interfaces=["agent"])
    assert set(found.ports) == {M1} and found.any_served
    assert (found.ports[M1].node_uuid, found.ports[M1].provision_state) == (node_uuid,
                                                                           "inspect wait")
    found = source.lookup(nodes=[node_uuid, "gone"], ports=[port_uuid],
                          supported_interfaces=["agent"])
    assert set(found.ports) == {M1, M2, M3} and found.missing_nodes == {"gone"}
    assert found.served_nodes == {node_uuid: {M1, M2}}
    assert found.ports[M3].provision_state == "active"
    # A node not served now: its ports are not scanned for (Ironic has no index on
    # ports.node_id), only the MACs held as served for it are read, by address.
    statements = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    found = source.lookup(nodes=[node_uuid], supported_interfaces=["redfish"],
                          held={node_uuid: {M2}})
    assert set(found.ports) == {M2} and found.unserved_nodes == {node_uuid}
    assert not found.any_served and not any("node_id IN" in s for s in statements)
    assert source.unanswered_for() == 0


def test_port_addresses_are_interned_and_odd_values_passed_on():
    # One string per MAC whatever the driver hands back; None dropped (the policy ignores
    # it), a non-string kept for the policy to reject.
    from pxe_filter.source import _interned  # noqa: PLC0415

    first, second = "".join(["52:54:00:00:00:", "01"]), "".join(["52:54:00:00:00:", "01"])
    assert first is not second
    assert _interned([first])[0] is _interned([second])[0]
    assert _interned([first, None, 5]) == [first, 5]


def test_a_sync_reports_removed_foreign_files_after_its_writes(engine, hosts):
    # The report may reload dnsmasq, which then forgets what the removed file said: a deny
    # renamed to another spelling must be back in the MAC's own file by then.
    mac = "52:54:00:ab:cd:01"
    add_node(engine, "manageable", [mac])
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    seen = []
    sync.after_foreign = lambda report: seen.append(
        (report.removed, (hosts / mac).exists() and content(hosts, mac)))
    os.rename(hosts / mac, hosts / mac.upper())
    sync.full_sync()
    assert seen == [([mac.upper()], f"{mac},ignore\n")]
