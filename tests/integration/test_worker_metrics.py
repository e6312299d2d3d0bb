"""The worker's Prometheus endpoint: processing counted where it runs, behind a real API."""

from datetime import timedelta

import requests

from inspection.db import migration
from inspection.db.models import utcnow
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body, macs_of
from tests.support import services
from tests.support.metrics import scrape, value, wait_for
from tests.support.services_procs import free_port, start_api, start_worker


def test_worker_serves_processing_metrics_on_its_port(tmp_path, sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    data = body("bios-vm-x86_64")
    add_node(engine, "inspect wait", macs=macs_of(data)[:1])
    add_node(engine, "inspect wait", inspection_started_at=utcnow() - timedelta(hours=1))
    engine.dispose()
    vhost = services.create_vhost()
    port = free_port()
    # A 60 s timeout is checked every 6 s: the overdue node fails, the other one is posted.
    worker = start_worker(tmp_path, sqlite_url, vhost,
                          {"worker": {"prometheus_port": port},
                           "inspector": {"inspect_wait_timeout": 60}})
    api = start_api(tmp_path, sqlite_url, vhost)
    try:
        worker.wait_ready()
        api.wait_ready()
        worker_url = f"http://127.0.0.1:{port}/metrics"
        before = scrape(worker_url)
        assert value(before, "ironic_inspection_processed_total", outcome="finished") == 0
        assert value(before, "ironic_inspection_processing_duration_seconds_count") == 0

        resp = requests.post(f"{api.url}/v1/continue_inspection", json=data, timeout=10)
        assert resp.status_code == 202, resp.text
        # The duration is observed last, when process() returns.
        done = wait_for(worker_url, lambda s: value(
            s, "ironic_inspection_processing_duration_seconds_count") == 1, timeout=20)
        assert value(done, "ironic_inspection_processed_total", outcome="finished") == 1
        assert value(done, "ironic_inspection_processing_in_progress") == 0
        assert value(done, "ironic_inspection_callbacks_total", outcome="accepted") is None
        wait_for(worker_url, lambda s: value(s, "ironic_inspection_timeouts_total") == 1,
                 timeout=20)

        # The API counted the callback and its lookup, but processed nothing itself.
        api_side = scrape(f"{api.url}/metrics")
        assert value(api_side, "ironic_inspection_callbacks_total", outcome="accepted") == 1
        assert value(api_side, "ironic_inspection_lookups_total", method="mac") == 1
        assert value(api_side, "ironic_inspection_processed_total", outcome="finished") is None
        assert value(api_side, "ironic_inspection_processing_backlog") == 0
    finally:
        codes = [api.stop(), worker.stop()]
        services.delete_vhost(vhost)
    assert codes == [0, 0], worker.log_text()
