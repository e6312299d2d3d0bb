"""Accepted callbacks in the database, on every backend: one owner at a time, deleted with
the processing result, fenced when taken over, taken over from dead processes."""

import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from inspection.db.models import InspectionCallback, InspectionProcess, Node, utcnow
from inspection.inspect_control import abort_inspection, start_inspection
from inspection.processing import callbacks
from inspection.timeouts import fail_timed_out
from inspection.worker import heartbeat, recovery
from inspection.worker.runner import CallbackRunner
from pxe_filter.broadcast import FilterNotifier
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node, make_conf, node_row
from tests.integration.pipeline_support import body, macs_of, service_for


def _row(engine, row_id):
    with engine.connect() as conn:
        return conn.execute(sa.select(InspectionCallback.__table__)
                            .where(InspectionCallback.id == row_id)).first()


def test_each_callback_is_claimed_by_one_process_at_a_time(db_engine):
    ids = {callbacks.store(db_engine, f"node-{i}", {"inventory": {"n": i}}) for i in range(20)}
    claimed: dict[str, list] = {"a": [], "b": []}

    def drain(host: str) -> None:
        while (claim := callbacks.claim_next(db_engine, host)) is not None:
            claimed[host].append(claim)

    threads = [threading.Thread(target=drain, args=(host,)) for host in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    got = [c.id for host in claimed for c in claimed[host]]
    assert sorted(got) == sorted(ids)  # every one, none twice
    claim = claimed["a"][0] if claimed["a"] else claimed["b"][0]
    assert claim.data == {"inventory": {"n": int(claim.node_uuid.split("-")[1])}}
    assert claim.attempts == 1
    assert callbacks.due(db_engine) == 0 and callbacks.count(db_engine) == 20


def test_a_given_back_callback_is_due_again_after_its_retry_time(db_engine):
    row_id = callbacks.store(db_engine, "node-1", {"inventory": {}})
    claim = callbacks.claim_next(db_engine, "a")
    later = utcnow() + timedelta(seconds=60)
    assert callbacks.unclaim(db_engine, claim, later, count_attempt=False)
    assert callbacks.claim_next(db_engine, "b") is None  # not before its retry time
    again = callbacks.claim_next(db_engine, "b", now=later)
    assert again.id == row_id and again.attempts == 1  # the locked try did not count


def test_processing_deletes_the_callback_with_the_result_and_a_lost_claim_commits_nothing(
        db_engine, tmp_path):
    service = service_for(db_engine, tmp_path, DEFAULT={"host": "worker-a"})
    data = body("bios-vm-x86_64")
    node = add_node(db_engine, macs=macs_of(data)[:1], inspect_interface="agent")
    callbacks.store(db_engine, node["uuid"], data)
    stale = callbacks.claim_next(db_engine, "worker-a")
    # worker-a is judged dead; worker-b takes the callback over.
    assert callbacks.release_owner(db_engine, "worker-a") == 1
    fresh = callbacks.claim_next(db_engine, "worker-b")

    service.process(node["uuid"], data, settle=stale.settle)  # worker-a wakes up late
    assert node_row(db_engine, node["id"]).provision_state == "inspect wait"  # discarded
    assert not stale.settled and _row(db_engine, fresh.id).owner == "worker-b"

    service.process(node["uuid"], data, settle=fresh.settle)
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "manageable" and row.reservation is None
    assert fresh.settled and callbacks.count(db_engine) == 0


def test_the_work_of_a_dead_process_is_taken_over(db_engine):
    now = utcnow()
    heartbeat.beat(db_engine, "dead", now - timedelta(seconds=100))
    heartbeat.beat(db_engine, "slow", now - timedelta(seconds=10))
    heartbeat.beat(db_engine, "alive", now)
    held = {host: add_node(db_engine, reservation=host)
            for host in ("dead", "slow", "ironic-conductor")}
    rows = {}
    for host in ("dead", "slow"):
        rows[host] = callbacks.store(db_engine, held[host]["uuid"], {"inventory": {}})
        assert callbacks.claim_next(db_engine, host).id == rows[host]

    taken = recovery.take_over_dead(db_engine, "alive", timeout=30, now=now)
    assert [(t.host, t.reservations, t.callbacks) for t in taken] == [("dead", 1, 1)]
    assert node_row(db_engine, held["dead"]["id"]).reservation is None
    assert _row(db_engine, rows["dead"]).owner is None  # claimable again
    # A live process's work, and reservations of hosts that never registered, stay.
    assert node_row(db_engine, held["slow"]["id"]).reservation == "slow"
    assert node_row(db_engine, held["ironic-conductor"]["id"]).reservation == \
        "ironic-conductor"
    assert _row(db_engine, rows["slow"]).owner == "slow"
    with db_engine.connect() as conn:
        hosts = set(conn.execute(sa.select(InspectionProcess.host)).scalars())
    assert hosts == {"slow", "alive"}
    # The dead one comes back: it learns that it was judged dead.
    assert heartbeat.beat(db_engine, "dead") is False
    assert heartbeat.beat(db_engine, "dead") is True


def test_claims_of_processes_that_left_the_table_are_taken_over(db_engine):
    heartbeat.beat(db_engine, "gone")
    row_id = callbacks.store(db_engine, "node-1", {"inventory": {}})
    callbacks.claim_next(db_engine, "gone")
    with db_engine.begin() as conn:
        conn.execute(sa.delete(InspectionProcess.__table__))
    heartbeat.beat(db_engine, "alive")
    recovery.take_over_dead(db_engine, "alive", timeout=30)
    assert _row(db_engine, row_id).owner is None


def test_the_inspect_wait_timeout_counts_from_the_start_whatever_data_arrives(db_engine,
                                                                             tmp_path):
    # Someone on the provisioning network posting data for the node again and again must
    # not keep it in inspect wait (and its MACs allowed) for ever.
    conf = make_conf(tmp_path, DEFAULT={"host": "w"}, inspector={"inspect_wait_timeout": 60})
    started = utcnow() - timedelta(seconds=600)
    accepted = add_node(db_engine, inspection_started_at=started)
    silent = add_node(db_engine, inspection_started_at=started)
    fresh = add_node(db_engine, inspection_started_at=utcnow())
    for node in (accepted, fresh):
        callbacks.store(db_engine, node["uuid"], {"inventory": {}})
    failed = fail_timed_out(db_engine, conf, FilterNotifier(None))
    assert sorted(failed) == sorted([accepted["uuid"], silent["uuid"]])
    assert node_row(db_engine, accepted["id"]).provision_state == "inspect failed"
    assert node_row(db_engine, fresh["id"]).provision_state == "inspect wait"
    assert callbacks.count(db_engine) == 1  # the timed-out node's data is gone with it


def test_data_that_keeps_killing_its_processes_fails_the_inspection(db_engine, tmp_path):
    service = service_for(db_engine, tmp_path, DEFAULT={"host": "worker-a"},
                          processing={"max_attempts": 2})
    data = body("bios-vm-x86_64")
    node = add_node(db_engine, macs=macs_of(data)[:1], inspect_interface="agent")
    row_id = callbacks.store(db_engine, node["uuid"], data)
    with db_engine.begin() as conn:  # two processes died while processing it
        conn.execute(sa.update(InspectionCallback.__table__)
                     .where(InspectionCallback.id == row_id).values(attempts=2))
    runner = CallbackRunner(db_engine, service, service.conf, threads=1)
    runner.start()
    try:
        assert runner.wait_idle(30)
    finally:
        runner.stop()
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "inspect failed" and row.reservation is None
    assert "interrupted 2 time(s)" in row.last_error
    assert "max_attempts = 2" in row.last_error


def test_a_callback_as_large_as_the_api_accepts_is_stored_whole(db_engine, tmp_path):
    limit = make_conf(tmp_path).api.max_request_body_size
    data = {"inventory": {"interfaces": []}, "blob": "x" * (limit - 100),
            "names": ["r\u00e9seau \u2013 \u00fc"] * 100}
    row_id = callbacks.store(db_engine, "node-1", data)
    claim = callbacks.claim_next(db_engine, "a")
    assert claim.id == row_id and claim.data == data


def test_a_frozen_process_holding_a_row_lock_delays_only_its_reservations(db_url):
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite locks the whole database, not a row")
    engine = create_engine(db_url, lock_timeout=1)
    heartbeat.beat(engine, "frozen", utcnow() - timedelta(seconds=100))
    heartbeat.beat(engine, "alive")
    node = add_node(engine, reservation="frozen")
    row_id = callbacks.store(engine, node["uuid"], {"inventory": {}})
    callbacks.claim_next(engine, "frozen")
    holder = engine.connect()  # the frozen process's transaction, open on the node row
    holder.execute(sa.update(Node).where(Node.id == node["id"]).values(last_error="x"))
    try:
        assert recovery.take_over_dead(engine, "alive", timeout=30) == []
        assert _row(engine, row_id).owner is None  # its callbacks are free at once
    finally:
        holder.rollback()
        holder.close()
    taken = recovery.take_over_dead(engine, "alive", timeout=30)
    assert [(t.host, t.reservations, t.callbacks) for t in taken] == [("frozen", 1, 0)]
    assert node_row(engine, node["id"]).reservation is None
    engine.dispose()


def test_heartbeats_use_the_database_clock(db_engine):
    server = heartbeat.database_now(db_engine)
    assert abs((server - utcnow()).total_seconds()) < 5  # UTC, naive, on every backend
    heartbeat.beat(db_engine, "w")
    with db_engine.connect() as conn:
        stamped = conn.execute(sa.select(InspectionProcess.heartbeat_at)).scalar()
    assert abs((stamped - server).total_seconds()) < 5


def test_the_newest_data_of_a_node_replaces_older_data_not_processed_yet(db_engine):
    callbacks.store(db_engine, "node-1", {"inventory": {"n": 1}})
    older = callbacks.claim_next(db_engine, "a")  # being processed right now
    newest = callbacks.store(db_engine, "node-1", {"inventory": {"n": 2}})
    assert callbacks.count(db_engine) == 1
    claim = callbacks.claim_next(db_engine, "b")
    assert claim.id == newest and claim.data == {"inventory": {"n": 2}}
    with Session(db_engine) as session:
        assert not older.settle(session)  # the older run's outcome is discarded


def test_data_stored_for_an_earlier_inspection_never_completes_a_later_one(db_engine,
                                                                          tmp_path):
    service = service_for(db_engine, tmp_path, DEFAULT={"host": "worker-a"})
    data = body("bios-vm-x86_64")
    node = add_node(db_engine, state="manageable", macs=macs_of(data)[:1],
                    inspect_interface="agent")
    notifier = FilterNotifier(None)
    start_inspection(db_engine, service.conf, node["uuid"], notifier)
    accepted = service.accept(data)
    # Abort and inspect again commit before the accepted data is stored (a slow API).
    abort_inspection(db_engine, service.conf, node["uuid"], notifier)
    start_inspection(db_engine, service.conf, node["uuid"], notifier)
    callbacks.store(db_engine, accepted.node_uuid, accepted.data, accepted.attempt)
    claim = callbacks.claim_next(db_engine, "worker-a")
    service.process(claim.node_uuid, claim.data, settle=claim.settle, attempt=claim.attempt)
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "inspect wait" and row.inspection_finished_at is None
    assert claim.settled and callbacks.count(db_engine) == 0  # dropped, not retried
    # Data accepted for the current inspection completes it.
    fresh = service.accept(data)
    callbacks.store(db_engine, fresh.node_uuid, fresh.data, fresh.attempt)
    claim = callbacks.claim_next(db_engine, "worker-a")
    service.process(claim.node_uuid, claim.data, settle=claim.settle, attempt=claim.attempt)
    assert node_row(db_engine, node["id"]).provision_state == "manageable"


def test_data_stored_without_an_attempt_is_no_wildcard(db_engine, tmp_path):
    service = service_for(db_engine, tmp_path, DEFAULT={"host": "worker-a"})
    data = body("bios-vm-x86_64")
    node = add_node(db_engine, state="manageable", macs=macs_of(data)[:1],
                    inspect_interface="agent")
    start_inspection(db_engine, service.conf, node["uuid"], FilterNotifier(None))
    callbacks.store(db_engine, node["uuid"], data, attempt=None)  # e.g. an older API's row
    claim = callbacks.claim_next(db_engine, "worker-a")
    service.process(claim.node_uuid, claim.data, settle=claim.settle, attempt=claim.attempt)
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "inspect wait" and row.inspection_finished_at is None
    assert claim.settled and callbacks.count(db_engine) == 0


def test_concurrent_stores_keep_one_row_per_node_and_never_fail(db_engine):
    errors: list = []

    def post(worker: int) -> None:
        for i in range(6):
            try:
                callbacks.store(db_engine, f"node-{(worker + i) % 4}", {"inventory": {"w": worker}})
                callbacks.store(db_engine, f"own-{worker}-{i}", {"inventory": {}})
            except Exception as exc:  # a deadlock or a lost race would land here
                errors.append(exc)

    threads = [threading.Thread(target=post, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    with db_engine.connect() as conn:
        per_node = conn.execute(sa.select(InspectionCallback.node_uuid, sa.func.count())
                                .group_by(InspectionCallback.node_uuid)).all()
    assert len(per_node) == 4 + 16 * 6 and {n for _, n in per_node} == {1}
