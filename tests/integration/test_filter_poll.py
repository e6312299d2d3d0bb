"""With no broadcast and no notification at all, the filter follows the database by polling.

The scale test runs at 100k ports on PostgreSQL with the default sync_period (45 s): state
flips and a deletion reach the files within seconds, while an idle minute reads little and
costs little CPU, and changes to nodes alone read no port row. A small test checks the same
on each backend, and which table each change has the poll read.
"""

import os
import time
import uuid
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter.common.database import create_engine
from pxe_filter.poller import Poller
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import FilterSync
from tests.support import services
from tests.support.daemon import start_filter
from tests.support.filter_nodes import add_node, fill, set_state
from tests.support.filter_nodes import bulk_mac as mac

WILDCARD = "unknown_hosts_filter"
PORTS = 100_000
FLIPS = 12
NODE_CHANGES = 8
ON, OFF = "inspect wait", "manageable"


def allowed(hostsdir, address: str) -> bool | None:
    """True/False for an allow/deny file, None without one."""
    try:
        text = (hostsdir / address).read_text()
    except FileNotFoundError:
        return None
    return not text.strip().endswith(",ignore")


def wait_for(check, timeout: float) -> float:
    """Seconds until ``check()`` holds; fails after ``timeout``."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, f"not within {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - start


@pytest.fixture(scope="module")
def big_pg_url():
    url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    fill(url, PORTS)
    yield url
    services.drop_database(services.PG_ADMIN_URL, url)


def rows_read(engine, tables: tuple[str, ...] = ("nodes", "ports")) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)) "
            "FROM pg_stat_user_tables WHERE relname IN :tables")
            .bindparams(sa.bindparam("tables", expanding=True)), {"tables": tables}).scalar()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_poll_follows_100k_ports_without_messages(big_pg_url, tmp_path):
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, big_pg_url, hostsdir, debug=False)  # no transport_url
    engine = create_engine(big_pg_url)
    try:
        daemon.wait_ready(60)
        assert allowed(hostsdir, mac(1)) is False
        # One writer connection, as a conductor's pool keeps, each flip as soon as the last
        # one showed: PostgreSQL holds back the counters of a process that wrote less than a
        # second after it last published them, so only the rows show most of these flips.
        delays = []
        with engine.connect() as writer:
            for flip in range(FLIPS):
                node = 1000 + flip // 2 * 7
                state = ON if flip % 2 == 0 else OFF
                with writer.begin():
                    writer.execute(sa.update(Node).where(Node.id == node)
                                   .values(provision_state=state))
                addresses = [mac(2 * node - 1), mac(2 * node)]
                delays.append(wait_for(lambda want=state == ON, addresses=addresses: all(
                    allowed(hostsdir, a) is want for a in addresses), 2.5))
        assert max(delays) <= 2.5, delays

        time.sleep(12)  # past the poll margin: the flips' rows no longer count as recent
        before_rows, before_cpu = rows_read(engine), cpu_seconds(daemon.pid)
        time.sleep(60)
        idle_rows = rows_read(engine) - before_rows
        idle_cpu = cpu_seconds(daemon.pid) - before_cpu
        assert idle_rows <= 1_000_000, idle_rows
        assert idle_cpu / 60 < 0.05, idle_cpu

        # Changes to nodes alone (a conductor taking and releasing its lock), each seen by
        # the signal: the poll scans nodes each time, never ports. Only a full sync (one
        # every 45 s) reads the ports meanwhile.
        before_nodes, before_ports = rows_read(engine, ("nodes",)), rows_read(engine, ("ports",))
        with engine.connect() as writer:
            for change in range(NODE_CHANGES):
                with writer.begin():
                    writer.execute(sa.update(Node).where(Node.id == 2000 + change).values(
                        reservation=None if change % 2 else "conductor-1"))
                time.sleep(1.2)  # PostgreSQL publishes a process's counters once a second
        time.sleep(11)  # the filter's counters of its reads are published too
        nodes_rows = rows_read(engine, ("nodes",)) - before_nodes
        ports_rows = rows_read(engine, ("ports",)) - before_ports
        assert nodes_rows >= NODE_CHANGES * PORTS // 2, nodes_rows  # each change: a scan
        assert ports_rows <= 2 * PORTS, ports_rows

        # Deleting a served node and its ports reaches the files within seconds.
        node = 5000
        set_state(big_pg_url, node, ON)
        addresses = [mac(2 * node - 1), mac(2 * node)]
        wait_for(lambda: all(allowed(hostsdir, a) for a in addresses), 2.5)
        wait_for(lambda: allowed(hostsdir, WILDCARD) is True, 2.5)
        with engine.begin() as conn:
            conn.execute(sa.delete(Port).where(Port.node_id == node))
            conn.execute(sa.delete(Node).where(Node.id == node))
        wait_for(lambda: not any(allowed(hostsdir, a) for a in addresses)
                 and allowed(hostsdir, WILDCARD) is False, 8)
    finally:
        engine.dispose()
        assert daemon.stop() == 0


def test_poll_follows_each_backend(db_url, tmp_path):
    """Flips, a new port and a deletion, with no message, on a small database."""
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    first = add_node(db_url, OFF, [mac(1)])
    second = add_node(db_url, OFF, [mac(2)])
    daemon = start_filter(tmp_path, db_url, hostsdir, debug=False)
    engine = create_engine(db_url)
    try:
        daemon.wait_ready(30)
        assert allowed(hostsdir, mac(1)) is False
        with engine.connect() as writer:  # one connection, as a conductor's pool keeps
            for statement, check in (
                    (sa.update(Node).where(Node.id == first).values(provision_state=ON),
                     lambda: allowed(hostsdir, mac(1)) is True),
                    (sa.update(Node).where(Node.id == first).values(provision_state=OFF),
                     lambda: allowed(hostsdir, mac(1)) is False),
                    (sa.update(Node).where(Node.id == second).values(provision_state=ON),
                     lambda: allowed(hostsdir, mac(2)) is True),
                    # a port added to a served node, as inspection does
                    (sa.insert(Port).values(uuid=str(uuid.uuid4()), address=mac(3),
                                            node_id=second),
                     lambda: allowed(hostsdir, mac(3)) is True)):
                with writer.begin():
                    writer.execute(statement)
                wait_for(check, 2.5)  # at once after the last: see the 100k test
            with writer.begin():
                writer.execute(sa.delete(Port).where(Port.node_id == second))
                writer.execute(sa.delete(Node).where(Node.id == second))
        wait_for(lambda: not allowed(hostsdir, mac(2)) and not allowed(hostsdir, mac(3))
                 and allowed(hostsdir, WILDCARD) is False, 8)
    finally:
        engine.dispose()
        assert daemon.stop() == 0


class RecordingSource(DatabaseSource):
    """The real source, recording which tables each of the poll's row reads scanned."""

    def __init__(self, engine) -> None:
        super().__init__(engine)
        self.reads: list[list[str]] = []
        self.last_read = time.monotonic()

    def changes(self, since, above):
        self.reads.append(sorted(since))
        self.last_read = time.monotonic()
        return super().changes(since, above)


def test_poll_reads_the_table_that_changed(db_url, tmp_path):
    """A node's state change scans ``nodes`` alone, a new or deleted port ``ports`` alone
    (SQLite's signal, the files' size and time, is one for both tables)."""
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    node = add_node(db_url, OFF, [mac(1)])
    engine = create_engine(db_url)
    source = RecordingSource(create_engine(db_url))
    sync = FilterSync(source, str(hostsdir))
    sync.full_sync()
    poller = Poller(source, sync, lambda: SimpleNamespace(poll_interval=0.05, poll_margin=10))

    def poll() -> None:
        time.sleep(0.05)
        poller.poll()
        sync.reconcile_pending()

    def quiet() -> None:
        """Poll until a poll reads no row (signals still, SETTLE past; MariaDB's
        UPDATE_TIME more than 2 s old)."""
        deadline = time.monotonic() + 20
        while time.monotonic() - source.last_read < 1.5:
            assert time.monotonic() < deadline, source.reads[-5:]
            poll()

    new_node = {"uuid": str(uuid.uuid4()), "provision_state": OFF, "conductor_group": ""}
    try:
        with engine.connect() as writer:  # connected now: PostgreSQL publishes its writes
            for tables, statements, check in (
                    ({"nodes"}, [sa.update(Node).where(Node.id == node)
                                 .values(provision_state=ON)],
                     lambda: allowed(hostsdir, mac(1)) is True),
                    ({"ports"}, [sa.insert(Port).values(uuid=str(uuid.uuid4()),
                                                        address=mac(2), node_id=node)],
                     lambda: allowed(hostsdir, mac(2)) is True),
                    ({"ports"}, [sa.delete(Port).where(Port.address == mac(2))],
                     lambda: sync.full_sync_due),
                    # a port created right after its node, as two API calls do: PostgreSQL
                    # holds back the second write's counters, its new highest id shows
                    ({"nodes", "ports"}, [sa.insert(Node).values(id=node + 1, **new_node),
                                          sa.insert(Port).values(uuid=str(uuid.uuid4()),
                                                                 address=mac(3),
                                                                 node_id=node + 1)],
                     lambda: allowed(hostsdir, mac(3)) is False)):
                quiet()
                first = len(source.reads)
                for statement in statements:
                    with writer.begin():
                        writer.execute(statement)
                deadline = time.monotonic() + 2.5
                while not check():  # a deleted port: the full sync it asks for
                    assert time.monotonic() < deadline, (tables, source.reads[first:])
                    poll()
                quiet()
                read = {table for tables_read in source.reads[first:] for table in tables_read}
                assert read == ({"nodes", "ports"} if engine.dialect.name == "sqlite"
                                else tables), (tables, source.reads[first:])
    finally:
        engine.dispose()
        source.close()
