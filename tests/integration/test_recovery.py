"""The one recovery mechanism (inspection.worker.recovery, run by the runner's housekeeping):
who is dead is decided by heartbeats and claims alone, and every leftover of a failed commit
or release is repaired within one pass."""

import sqlite3
from datetime import timedelta

import pytest
import sqlalchemy as sa

from inspection import locking
from inspection.db import migration
from inspection.db.models import InspectionCallback, InspectionProcess, Node, utcnow
from inspection.errors import NodeLocked
from inspection.processing import callbacks
from inspection.timeouts import TimeoutTask
from inspection.worker import heartbeat, recovery
from inspection.worker.runner import CallbackRunner
from pxe_filter.broadcast import FilterNotifier
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node, make_conf, node_row


def _runner(engine, tmp_path, host="worker-a", timeout=100) -> CallbackRunner:
    conf = make_conf(tmp_path, DEFAULT={"host": host},
                     inspector={"inspect_wait_timeout": timeout},
                     processing={"heartbeat_interval": 1, "heartbeat_timeout": 30})
    runner = CallbackRunner(engine, service=None, conf=conf, threads=1)
    runner.host = host  # the identity these tests reserve and claim under
    return runner


def _waiting(engine, seconds_ago, holder):
    return add_node(engine, inspection_started_at=utcnow() - timedelta(seconds=seconds_ago),
                    reservation=holder)


def _attempts(engine, row_id):
    with engine.connect() as conn:
        return conn.execute(sa.select(InspectionCallback.attempts, InspectionCallback.owner)
                            .where(InspectionCallback.id == row_id)).one()


def _age_heartbeats(engine, seconds):
    """Every heartbeat ``seconds`` old: what a database outage that long leaves."""
    with engine.begin() as conn:
        conn.execute(sa.update(InspectionProcess.__table__).values(
            heartbeat_at=heartbeat.database_now(engine) - timedelta(seconds=seconds)))


def test_the_2x_rule_spares_registered_holders_and_this_process(db_engine, tmp_path):
    runner = _runner(db_engine, tmp_path, host="worker-a")
    heartbeat.beat(db_engine, "worker-a")
    heartbeat.beat(db_engine, "worker-b")  # a live worker, processing slowly
    conductor = _waiting(db_engine, 250, "ironic-conductor")  # never registered
    live = _waiting(db_engine, 250, "worker-b")
    own = _waiting(db_engine, 250, "worker-a")
    locking._hold("worker-a", own["id"])  # this process is using it right now
    try:
        runner.housekeep()
    finally:
        locking._unhold("worker-a", own["id"])
    assert node_row(db_engine, conductor["id"]).reservation is None
    assert node_row(db_engine, live["id"]).reservation == "worker-b"
    assert node_row(db_engine, own["id"]).reservation == "worker-a"


def test_unregistered_holders_are_released_after_twice_the_timeout_then_timed_out(
        db_engine, tmp_path):
    conf = make_conf(tmp_path, DEFAULT={"host": "worker-a"},
                     inspector={"inspect_wait_timeout": 100})
    dead = _waiting(db_engine, 250, "conductor-gone")   # > 2 x timeout: stale
    busy = _waiting(db_engine, 150, "conductor-1")      # overdue but maybe still processing
    fresh = _waiting(db_engine, 10, "conductor-1")
    assert recovery.release_unregistered(db_engine, 100) == [dead["uuid"]]
    assert node_row(db_engine, busy["id"]).reservation == "conductor-1"
    assert node_row(db_engine, fresh["id"]).reservation == "conductor-1"
    assert recovery.release_unregistered(db_engine, 0) == []  # timeout off: never
    assert TimeoutTask(db_engine, conf, FilterNotifier(None)).run_once() == [dead["uuid"]]
    row = node_row(db_engine, dead["id"])
    assert row.provision_state == "inspect failed" and "Timeout reached" in row.last_error


def test_leftover_reservations_and_claims_of_this_host_are_repaired_in_one_pass(
        db_engine, tmp_path):
    runner = _runner(db_engine, tmp_path)
    heartbeat.beat(db_engine, "worker-a")
    # An acquire whose commit the database reported failed, but that went through after all.
    ambiguous = add_node(db_engine)

    def commit_lost(conn, cursor, statement, *args) -> None:
        if statement.startswith("UPDATE nodes SET reservation"):
            raise sa.exc.OperationalError(statement, {}, Exception("connection lost"))

    sa.event.listen(db_engine, "after_cursor_execute", commit_lost)
    try:
        with pytest.raises(sa.exc.OperationalError):
            locking.acquire(db_engine, ambiguous["id"], "worker-a")
    finally:
        sa.event.remove(db_engine, "after_cursor_execute", commit_lost)
    with db_engine.begin() as conn:  # what the server had committed
        conn.execute(sa.update(Node).where(Node.id == ambiguous["id"])
                     .values(reservation="worker-a"))
    # A reservation of this host name that this process knows nothing about: maybe another
    # process misconfigured with the same host name, busy with the node. Not touched.
    unknown = add_node(db_engine, reservation="worker-a")
    other = add_node(db_engine, reservation="worker-b")
    # A claim committed under a token that no thread holds (its commit reported failed).
    node = add_node(db_engine)
    row_id = callbacks.store(db_engine, node["uuid"], {"inventory": {}})
    assert callbacks.claim_next(db_engine, "worker-a") is not None
    assert _attempts(db_engine, row_id) == (1, "worker-a")

    assert runner.housekeep() == 1  # the callback is due again
    assert node_row(db_engine, ambiguous["id"]).reservation is None
    assert node_row(db_engine, unknown["id"]).reservation == "worker-a"
    assert node_row(db_engine, other["id"]).reservation == "worker-b"
    assert _attempts(db_engine, row_id) == (0, None)  # it never ran: no attempt used


def _locked_sqlite(url):
    """A second connection holding the SQLite file's write lock: every write of the code
    under test then fails with "database is locked", as if the database were gone."""
    path = url.removeprefix("sqlite:///")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


@pytest.fixture
def quick_sqlite(sqlite_url):
    """An SQLite database whose writes give up after 0.2 s when locked."""
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    engine = sa.create_engine(sqlite_url, connect_args={"timeout": 0.2,
                                                        "check_same_thread": False})
    yield sqlite_url, engine
    engine.dispose()


def test_a_refused_release_is_repaired_by_the_next_pass(quick_sqlite, tmp_path):
    url, engine = quick_sqlite
    runner = _runner(engine, tmp_path)
    heartbeat.beat(engine, "worker-a")
    node = add_node(engine)
    locking.acquire(engine, node["id"], "worker-a")
    holder = _locked_sqlite(url)
    try:
        with pytest.raises(sa.exc.OperationalError):
            locking.release(engine, node["id"], "worker-a")
    finally:
        holder.rollback()
        holder.close()
    assert node_row(engine, node["id"]).reservation == "worker-a"  # the leftover
    with pytest.raises(NodeLocked):  # every claim of the node would retry, for ever
        locking.acquire(engine, node["id"], "worker-a")
    runner.housekeep()
    assert node_row(engine, node["id"]).reservation is None
    locking.acquire(engine, node["id"], "worker-a")
    assert locking.release(engine, node["id"], "worker-a")


def test_a_retried_give_back_keeps_count_attempt(quick_sqlite, tmp_path):
    url, engine = quick_sqlite
    runner = _runner(engine, tmp_path)
    heartbeat.beat(engine, "worker-a")
    row_id = callbacks.store(engine, "node-1", {"inventory": {}})
    claim = callbacks.claim_next(engine, "worker-a")
    holder = _locked_sqlite(url)
    try:  # the node was locked by someone else, and the database refuses the give-back
        runner._give_back(claim, None, count_attempt=False)
    finally:
        holder.rollback()
        holder.close()
    assert _attempts(engine, row_id) == (1, "worker-a")
    runner.housekeep()
    assert _attempts(engine, row_id) == (0, None)


def test_after_an_outage_nothing_is_taken_over_until_this_heartbeat_is_fresh(
        db_engine, tmp_path):
    runner = _runner(db_engine, tmp_path, host="worker-a")
    runner.beat()
    heartbeat.beat(db_engine, "worker-b")
    node = add_node(db_engine, reservation="worker-b")
    row_id = callbacks.store(db_engine, node["uuid"], {"inventory": {}})
    assert callbacks.claim_next(db_engine, "worker-b").id == row_id
    _age_heartbeats(db_engine, 100)  # the database was away for 100 s

    # worker-a's own heartbeat is as old as worker-b's: both may be alive.
    assert recovery.take_over_dead(db_engine, "worker-a", timeout=30) == []
    runner.housekeep()
    assert node_row(db_engine, node["id"]).reservation == "worker-b"
    assert _attempts(db_engine, row_id) == (1, "worker-b")
    # Its first heartbeat after the outage: still nothing (worker-b has not had its turn).
    runner.beat()
    runner.housekeep()
    assert _attempts(db_engine, row_id) == (1, "worker-b")
    # Fresh for a whole interval, and worker-b still silent: worker-b is dead.
    runner.beat()
    runner.housekeep()
    assert node_row(db_engine, node["id"]).reservation is None
    assert _attempts(db_engine, row_id) == (1, None)  # the takeover counted no attempt
    assert callbacks.claim_next(db_engine, "worker-a").attempts == 2


def test_an_api_that_hands_its_data_to_workers_repairs_its_refused_releases(quick_sqlite):
    url, engine = quick_sqlite
    repair = recovery.ReservationRepair(engine, "api-1", interval=1)
    node = add_node(engine, state="manageable")
    claimed = add_node(engine)
    callbacks.store(engine, claimed["uuid"], {"inventory": {}})
    callbacks.claim_next(engine, "api-1")  # not this process's business: it claims nothing
    locking.acquire(engine, node["id"], "api-1")  # an abort, say
    holder = _locked_sqlite(url)
    try:
        with pytest.raises(sa.exc.OperationalError):
            locking.release(engine, node["id"], "api-1")
        assert repair.run_once() == []  # the database is still away: logged, not raised
    finally:
        holder.rollback()
        holder.close()
    assert repair.run_once() == [node["uuid"]]
    assert node_row(engine, node["id"]).reservation is None
    assert callbacks.due(engine) == 0


def test_a_process_whose_heartbeat_returns_before_the_takeover_keeps_its_reservations(
        db_engine):
    now = heartbeat.database_now(db_engine)
    heartbeat.beat(db_engine, "alive/worker/1")
    heartbeat.beat(db_engine, "slow/worker/2", now - timedelta(seconds=100))
    node = add_node(db_engine, reservation="slow/worker/2")
    with db_engine.connect() as conn:  # what the takeover read: a stale heartbeat
        stale = conn.execute(sa.select(InspectionProcess.host, InspectionProcess.heartbeat_at)
                             .where(InspectionProcess.host == "slow/worker/2")).one()
    heartbeat.beat(db_engine, "slow/worker/2")  # it was only slow: its heartbeat returns
    assert recovery._take_over(db_engine, stale, 30) is None
    assert node_row(db_engine, node["id"]).reservation == "slow/worker/2"
    assert recovery.take_over_dead(db_engine, "alive/worker/1", 30) == []
    assert node_row(db_engine, node["id"]).reservation == "slow/worker/2"
