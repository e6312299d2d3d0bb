"""A PostgreSQL restart (connections refused for seconds) while 40 ramdisks post their data
through an API that hands it to two workers: the ramdisks see 202 or 503 (and retry), never
a 500, and every callback is processed exactly once. A private server: the shared one is
never restarted."""

import concurrent.futures
import threading
import time

import pytest
import requests

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support import services
from tests.support.callbacks import (
    REFUSED,
    callback_body,
    finished_counts,
    machine_macs,
    wait_finished,
)
from tests.support.private_postgres import PrivatePostgres
from tests.support.services_procs import ONE_ADDRESS_RACK, start_api, start_worker

pytestmark = pytest.mark.slow

DISCOVERY = {"auto_discovery": {"enabled": True}, "api": ONE_ADDRESS_RACK}
#: How long the server refuses connections.
OUTAGE = 4.0


@pytest.fixture
def private_pg():
    server = PrivatePostgres().start()
    engine = create_engine(server.url)
    migration.upgrade(engine)
    yield server, engine
    engine.dispose()
    server.remove()


@pytest.fixture
def vhost():
    url = services.create_vhost()
    yield url
    services.delete_vhost(url)


def _ramdisk(url: str, mac: str, seen: list) -> requests.Response | None:
    """Post as IPA does, trying again after a 503 or a refused connection."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            answer = requests.post(f"{url}/v1/continue_inspection", json=callback_body(mac),
                                   timeout=30)
        except requests.ConnectionError as exc:
            seen.append(type(exc).__name__)
        else:
            seen.append(answer.status_code)
            if answer.status_code != 503:
                return answer
        time.sleep(0.5)
    return None


def test_a_postgresql_restart_during_40_callbacks_loses_none_and_shows_no_500(
        tmp_path, private_pg, vhost):
    server, engine = private_pg
    macs = machine_macs(40, "52:54:00:e4")
    workers = [start_worker(tmp_path, server.url, vhost, DISCOVERY, name=f"worker{i}")
               for i in (1, 2)]
    api = start_api(tmp_path, server.url, vhost, DISCOVERY)
    procs = [*workers, api]
    seen: list = []
    try:
        for proc in procs[:2]:
            proc.wait_ready(60)
        api.wait_http(60)
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(_ramdisk, api.url, mac, seen) for mac in macs]
            time.sleep(0.3)  # some accepted, some in flight, most still to come
            restarted = threading.Event()

            def restart() -> None:
                server.down()
                time.sleep(OUTAGE)
                server.up()
                restarted.set()

            threading.Thread(target=restart).start()
            answers = [f.result(timeout=120) for f in futures]
        assert restarted.wait(60)
        rows = wait_finished(engine, macs, time.monotonic() + 90)
        logs = [p.log_text() for p in procs]
        print(f"answers seen by the ramdisks: "
              f"{ {code: seen.count(code) for code in set(seen)} }")
        assert 500 not in seen and all(a is not None and a.status_code == 202
                                       for a in answers), seen
        assert 503 in seen or "ConnectionError" in seen  # the outage was felt
        assert len(rows) == len(macs)
        assert all(r.inspection_finished_at is not None and r.last_error is None
                   for r in rows), [(r.uuid, r.last_error) for r in rows]
        counts = finished_counts(logs)
        assert len(counts) == len(macs) and max(counts.values()) == 1
        assert not any(REFUSED in log for log in logs)
        assert not any("Traceback" in log for log in logs)
        for proc in procs:
            assert proc.stop() == 0
    finally:
        for proc in procs:
            proc.stop()
