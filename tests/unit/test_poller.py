"""The poll on a real SQLite database: rows read only when the signal moved (and for SETTLE
seconds after), changes hinted, deletions turned into a full sync, a failing database backed
off. Which table is read per change: tests/integration/test_filter_poll.py."""

import logging
import time
import uuid
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from inspection.db.models import Node, Port
from pxe_filter import poller as poller_module
from pxe_filter.common.database import DatabaseError
from pxe_filter.poller import Poller
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import FilterSync

M1, M2 = "52:54:00:00:bb:01", "52:54:00:00:bb:02"


class CountingSource(DatabaseSource):
    """The real source, counting the row reads a poll makes (and able to fail them)."""

    def __init__(self, engine) -> None:
        super().__init__(engine)
        self.reads: list[list[str]] = []  # the tables each read scanned
        self.fail = False

    @property
    def row_reads(self) -> int:
        return len(self.reads)

    def change_signal(self) -> object:
        if self.fail:
            raise DatabaseError("the database does not answer")
        return super().change_signal()

    def changes(self, since, above):
        self.reads.append(sorted(since))
        return super().changes(since, above)


@pytest.fixture
def setup(engine, hosts, monkeypatch):
    monkeypatch.setattr(poller_module, "SETTLE", 0.0)  # its own test below
    with engine.begin() as conn:
        node = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state="manageable", inspect_interface="agent",
            conductor_group="")).inserted_primary_key[0]
        conn.execute(sa.insert(Port), [{"uuid": str(uuid.uuid4()), "address": mac,
                                        "node_id": node} for mac in (M1, M2)])
    source = CountingSource(engine)
    sync = FilterSync(source, str(hosts))
    sync.full_sync()
    poller = Poller(source, sync, lambda: SimpleNamespace(poll_interval=0.01, poll_margin=10))
    poller.poll()  # the first poll reads the rows: it has no signal to compare yet
    return engine, hosts, source, sync, poller, node


def poll(poller: Poller) -> None:
    poller._next = 0.0  # due now
    poller.poll()


def test_no_change_reads_no_row_and_a_change_is_written(setup):
    engine, hosts, source, sync, poller, node = setup
    reads = source.row_reads
    poll(poller)
    poll(poller)
    assert source.row_reads == reads
    with engine.begin() as conn:  # the ORM's onupdate sets updated_at, as Ironic's does
        conn.execute(sa.update(Node).where(Node.id == node)
                     .values(provision_state="inspect wait"))
    poll(poller)
    assert source.row_reads == reads + 1
    sync.reconcile_pending()
    assert (hosts / M1).read_text() == f"{M1}\n"
    assert not sync.full_sync_due


def test_a_deleted_port_asks_for_a_full_sync(setup):
    engine, _, _, sync, poller, _ = setup
    with engine.begin() as conn:
        conn.execute(sa.delete(Port).where(Port.address == M1))
        conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), address="52:54:00:00:bb:03"))
    poll(poller)  # one row more, one less: the count alone would not tell
    assert sync.full_sync_due


def test_a_failing_poll_backs_off_and_recovers(setup, caplog):
    caplog.set_level(logging.INFO, logger="pxe_filter.poller")
    engine, _, source, _, poller, node = setup
    source.fail = True
    poll(poller)
    assert poller.wait() >= poller_module.FAILING_INTERVAL - 1
    assert "Poll for changed nodes and ports failed" in caplog.text
    source.fail = False
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.id == node).values(provision_state="active"))
    reads = source.row_reads
    poll(poller)
    assert source.row_reads == reads + 1
    assert "works again" in caplog.text


def test_rows_are_read_for_settle_seconds_after_a_change(setup, monkeypatch):
    engine, _, source, _, poller, node = setup
    monkeypatch.setattr(poller_module, "SETTLE", 0.5)
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.id == node).values(provision_state="active"))
    reads = source.row_reads
    poll(poller)
    poll(poller)  # no move, but within SETTLE of one: a second write may not show yet
    assert source.row_reads == reads + 2
    assert source.reads[-1] == ["nodes", "ports"]  # SQLite's signal is one for both
    time.sleep(0.5)
    poll(poller)
    assert source.row_reads == reads + 2
