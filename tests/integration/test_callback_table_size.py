"""Replacing a pending callback does not grow its table without bound on PostgreSQL: every
replacement leaves a dead copy of the old payload until the table is vacuumed."""

import base64
import concurrent.futures
import os
import time

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.processing import callbacks
from pxe_filter.common.database import create_engine
from tests.support import services

NODE = "1be26c0b-03f2-4d2e-ae87-c02d5f2aeb39"
REPLACEMENTS = 150  # of about 1 MB each: 143 MiB written


@pytest.fixture
def pg_engine():
    url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    engine = create_engine(url)
    migration.upgrade(engine)
    yield engine
    engine.dispose()
    services.drop_database(services.PG_ADMIN_URL, url)


def _table_size(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT pg_total_relation_size('inspection_callbacks')")).scalar()


def test_a_replacement_flood_leaves_the_table_bounded_on_postgresql(pg_engine):
    # Incompressible, as an attacker would send: PostgreSQL compresses repetitive text.
    payload = {"inventory": {"interfaces": []},
               "blob": base64.b64encode(os.urandom(750_000)).decode()}
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: callbacks.store(pg_engine, NODE, payload),
                      range(REPLACEMENTS)))
    elapsed = time.monotonic() - started
    callbacks.CALLBACK_VACUUM.wait_idle(30)
    size = _table_size(pg_engine)
    with pg_engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT count(*) FROM inspection_callbacks")).scalar()
    written = REPLACEMENTS * callbacks.data_size(payload)
    print(f"{REPLACEMENTS} replacements of {callbacks.data_size(payload)} bytes in "
          f"{elapsed:.1f} s: {written / 2**20:.0f} MiB written, table "
          f"{size / 2**20:.1f} MiB on disk, {rows} row")
    assert rows == 1
    # Before: the table kept every dead copy (about 150 MiB here, 548 MB in the campaign).
    assert size < 80 * 2**20, size
