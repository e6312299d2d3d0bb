"""etc/grafana's dashboard asks only for metrics that the services really export."""

import json
import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from inspection.db import migration
from pxe_filter.common.database import create_engine
from pxe_filter.metrics import FilterMetrics
from pxe_filter.status.recorder import StatusRecorder
from pxe_filter.sync import SyncResult
from tests.integration.api_helpers import Api, api_conf

DASHBOARD = Path(__file__).parents[2] / "etc" / "grafana" / "ironic-pxe-filter-dashboard.json"
NAME = re.compile(r"\b(ironic_(?:pxe_filter|inspection)_[a-z_]+)")


def sample_names(text: str) -> set[str]:
    return {sample.name for family in text_string_to_metric_families(text)
            for sample in family.samples}


def filter_names(tmp_path) -> set[str]:
    """Every series a filter exports once it has synced, and follows notifications."""
    status = StatusRecorder(str(tmp_path / "state.json"), str(tmp_path),
                            lambda: (1, 2, True),
                            lambda: {"control": "pidfile", "pid": None, "running": False})
    status.notification_counts = lambda: {"received": 3, "applied": 1, "not relevant": 1,
                                          "ignored: malformed": 1}
    metrics = FilterMetrics(status)
    result = SyncResult(allowed=1, denied=2, written=3, duration=0.01)
    metrics.sync(result)
    status.sync(result, first=True)
    metrics.broadcast(SyncResult(allowed=1, written=1))
    return sample_names(generate_latest(metrics.registry).decode())


def inspection_names(tmp_path, sqlite_url) -> set[str]:
    """Every series the API serves at /metrics in all-in-one mode (it processes too)."""
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    api = Api(api_conf(tmp_path, sqlite_url))
    try:
        api.client.post("/v1/nodes", json={"driver": "fake-hardware"})
        response = api.client.get("/metrics")
        assert response.status_code == 200
        return sample_names(response.get_data(as_text=True))
    finally:
        api.close()


def test_every_expression_names_an_exported_metric(tmp_path, sqlite_url):
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"]
             for target in panel.get("targets", [])]
    assert len(exprs) > 20
    used = {name for expr in exprs for name in NAME.findall(expr)}
    exported = filter_names(tmp_path) | inspection_names(tmp_path, sqlite_url)
    assert used - exported == set()
    # And the dashboard shows most of what is exported (process_* aside).
    ours = {n for n in exported if n.startswith("ironic_")}
    assert len(used) >= 0.8 * len(ours), sorted(ours - used)
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
