"""Storage bounds of the ramdisk callback: nothing stored for unknown machines, and a cap on
the accepted callbacks waiting for processing (workers down, the bus without consumers)."""

import logging
import os

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Base, Node
from inspection.processing import callbacks
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.test_api_callback_bounds import many_nics


def _migrated_empty(url: str) -> str:
    engine = create_engine(url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    engine.dispose()
    return url


def _size(engine) -> int:
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT pg_database_size(current_database())")
                                ).scalar()
    return os.path.getsize(engine.url.database)


def padded(index: int, size: int) -> dict:
    data = many_nics(2)
    for iface in data["inventory"]["interfaces"]:
        iface["mac_address"] = iface["mac_address"].replace("52:54", f"52:{index % 256:02x}")
    data["padding"] = "x" * size
    return data


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_unknown_machines_without_discovery_store_nothing(request, tmp_path, backend):
    url = _migrated_empty(request.getfixturevalue(
        "pg_url" if backend == "postgresql" else "sqlite_url"))
    api = Api(api_conf(tmp_path, url))
    try:
        engine = api.context.engine
        before = _size(engine)
        for index in range(50):
            resp = api.unversioned.post("/v1/continue_inspection", json=padded(index, 200_000))
            assert resp.status_code == 404, resp.json
        grown = _size(engine) - before
        assert grown < 1024 * 1024, grown
        assert callbacks.count(engine) == 0
    finally:
        api.close()


@pytest.fixture
def queued_api(tmp_path, sqlite_url, rabbit_url):
    """Discovery on, a message bus without workers: accepted callbacks stay stored."""
    _migrated_empty(sqlite_url)
    apis = []

    def make(**processing):
        api = Api(api_conf(tmp_path, sqlite_url, DEFAULT={"transport_url": rabbit_url},
                           auto_discovery={"enabled": "true"}, processing=processing))
        apis.append(api)
        return api

    yield make
    for api in apis:
        api.close()


def _refusals(api, reason: str) -> float:
    text = api.client.get("/metrics").get_data(as_text=True)
    line = f'ironic_inspection_callback_refusals_total{{reason="{reason}"}} '
    return float(next(x for x in text.splitlines() if x.startswith(line)).split()[-1])


@pytest.mark.parametrize("limits, sizes, reason", [
    ({"max_pending_callbacks": 3}, [1000] * 3 + [1000], "pending_rows"),
    ({"max_pending_bytes": 1024 * 1024}, [300_000] * 3 + [300_000], "pending_bytes"),
])
def test_pending_callbacks_are_capped(queued_api, caplog, limits, sizes, reason):
    api = queued_api(**limits)
    before = _refusals(api, reason)
    statuses = []
    with caplog.at_level(logging.WARNING, logger="inspection.processing.callbacks"):
        for index, size in enumerate(sizes):
            resp = api.unversioned.post("/v1/continue_inspection", json=padded(index, size))
            statuses.append(resp.status_code)
    assert statuses == [202, 202, 202, 503]
    assert resp.headers["Retry-After"] == "60"
    assert "try again later" in error_message(resp)
    with api.context.engine.connect() as conn:  # the refused machine was not enrolled
        assert conn.execute(sa.select(sa.func.count()).select_from(Node)).scalar() == 3
    assert callbacks.count(api.context.engine) == 3
    assert _refusals(api, reason) == before + 1
    option = "max_pending_callbacks" if reason == "pending_rows" else "max_pending_bytes"
    assert f"[processing]{option}" in caplog.text
    assert "ironic-inspection-worker runs" in caplog.text
