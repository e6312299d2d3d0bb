"""Node reservations against a concurrent holder, on every backend."""

import time
from datetime import datetime

import pytest
import sqlalchemy as sa

from inspection import locking
from inspection.db import migration
from inspection.db.models import Node
from inspection.errors import NodeLocked, NotFound
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node, node_row
from tests.support import concurrency


def test_reserve_and_release(db_engine):
    node = add_node(db_engine, updated_at=datetime(2026, 1, 2, 3, 4, 5))
    with locking.reserved(db_engine, node["id"], "host-a"):
        assert node_row(db_engine, node["id"]).reservation == "host-a"
    row = node_row(db_engine, node["id"])
    assert row.reservation is None
    # A reservation is not a change of the node: updated_at stays.
    assert row.updated_at == datetime(2026, 1, 2, 3, 4, 5)


def test_released_when_the_block_fails(db_engine):
    node = add_node(db_engine)
    with pytest.raises(RuntimeError), locking.reserved(db_engine, node["id"], "host-a"):
        raise RuntimeError("boom")
    assert node_row(db_engine, node["id"]).reservation is None


def test_node_held_by_another_process_is_busy_and_untouched(db_url, db_engine):
    node = add_node(db_engine)
    # The concurrent holder (e.g. an Ironic conductor) uses its own engine and connection.
    conductor = create_engine(db_url)
    try:
        locking.acquire(conductor, node["id"], "conductor-1")
        started = time.monotonic()
        with pytest.raises(NodeLocked) as exc, locking.reserved(db_engine, node["id"], "me"):
            pytest.fail("entered a block on a node somebody else holds")
        assert time.monotonic() - started < 2
        assert exc.value.code == 409 and exc.value.holder == "conductor-1"
        assert node["uuid"] not in str(exc.value)
        # Our failed attempt did not steal or clear the holder's reservation.
        assert node_row(db_engine, node["id"]).reservation == "conductor-1"
        assert locking.release(db_engine, node["id"], "me") is False
        assert node_row(db_engine, node["id"]).reservation == "conductor-1"
        locking.release(conductor, node["id"], "conductor-1")
        with locking.reserved(db_engine, node["id"], "me"):
            assert node_row(conductor, node["id"]).reservation == "me"
    finally:
        conductor.dispose()


def test_only_one_of_many_concurrent_contenders_wins(db_url, db_engine):
    node = add_node(db_engine)
    contenders = 6

    def contend(index, engine):
        try:
            locking.acquire(engine, node["id"], f"host-{index}")
        except NodeLocked as exc:
            return f"busy:{exc.holder}"
        return "won"

    with concurrency.engines(db_url, contenders) as engines:
        results = concurrency.race([lambda i=i, e=e: contend(i, e)
                                    for i, e in enumerate(engines)], timeout=60)
    outcomes = {f"host-{i}": r for i, r in enumerate(results)}
    winners = [host for host, outcome in outcomes.items() if outcome == "won"]
    assert all(isinstance(r, str) for r in results), results
    assert len(outcomes) == contenders and len(winners) == 1, outcomes
    assert node_row(db_engine, node["id"]).reservation == winners[0]


def test_missing_node_is_not_found(db_engine):
    with pytest.raises(NotFound):
        locking.acquire(db_engine, 987654, "me")


def test_open_transaction_on_the_row_gives_busy_not_a_hang(pg_url):
    """A stuck transaction holding the node's row lock: busy after the timeout, no hang."""
    engine = create_engine(pg_url)
    migration.upgrade(engine)
    node = add_node(engine)
    other = create_engine(pg_url)
    try:
        with other.connect() as conn:
            trans = conn.begin()
            conn.execute(sa.update(Node).where(Node.id == node["id"]).values(extra={}))
            started = time.monotonic()
            with pytest.raises(NodeLocked):
                locking.acquire(engine, node["id"], "me", lock_timeout=0.5)
            assert time.monotonic() - started < 5
            trans.rollback()
        locking.acquire(engine, node["id"], "me")
        assert locking.release(engine, node["id"], "me")
    finally:
        with engine.begin() as conn:
            conn.execute(sa.delete(Node).where(Node.id == node["id"]))
        other.dispose()
        engine.dispose()


def test_release_unheld_at_start_clears_only_this_hosts_reservations_nothing_holds(db_engine):
    stray = add_node(db_engine, reservation="me")
    theirs = add_node(db_engine, reservation="conductor-1")
    busy = add_node(db_engine)
    with locking.reserved(db_engine, busy["id"], "me"):
        assert locking.release_unheld(db_engine, "me") == []  # not known to be a leftover
        assert locking.release_unheld(db_engine, "me", at_start=True) == [stray["uuid"]]
        assert node_row(db_engine, busy["id"]).reservation == "me"
    assert node_row(db_engine, stray["id"]).reservation is None
    assert node_row(db_engine, theirs["id"]).reservation == "conductor-1"
