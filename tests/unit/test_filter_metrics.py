"""The filter's metrics are the status figures: what ``status`` shows, Prometheus sees."""

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pxe_filter.metrics import FilterMetrics
from pxe_filter.status.recorder import StatusRecorder
from pxe_filter.sync import SyncResult


def samples(metrics: FilterMetrics) -> dict:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def recorder(tmp_path) -> StatusRecorder:
    return StatusRecorder(str(tmp_path / "state.json"), str(tmp_path), lambda: (2, 5, False),
                          lambda: {"control": "pidfile", "pid": 42, "running": True})


def test_figures_follow_the_status(tmp_path):
    status = recorder(tmp_path)
    metrics = FilterMetrics(status)
    before = samples(metrics)
    assert before[("ironic_pxe_filter_ready", ())] == 0
    assert ("ironic_pxe_filter_last_sync_timestamp_seconds", ()) not in before
    result = SyncResult(allowed=2, denied=5, written=7, failed=1, duration=0.2)
    metrics.sync(result)
    status.sync(result, first=True)
    metrics.broadcast(SyncResult(allowed=1, denied=2, rejected=3, written=3))
    status.repaired(["52:54:00:00:00:01", "52:54:00:00:00:02"])
    status.dnsmasq_event("reload", "test")
    after = samples(metrics)
    assert after[("ironic_pxe_filter_ready", ())] == 1
    assert after[("ironic_pxe_filter_syncs_total", ())] == 1
    assert after[("ironic_pxe_filter_allowed_macs", ())] == 2
    assert after[("ironic_pxe_filter_denied_macs", ())] == 5
    assert after[("ironic_pxe_filter_unknown_macs_allowed", ())] == 0
    assert after[("ironic_pxe_filter_files_written_total", (("origin", "sync"),))] == 7
    assert after[("ironic_pxe_filter_files_failed_total", (("origin", "sync"),))] == 1
    assert after[("ironic_pxe_filter_files_written_total", (("origin", "broadcast"),))] == 3
    assert after[("ironic_pxe_filter_broadcast_macs_total", (("decision", "rejected"),))] == 3
    assert after[("ironic_pxe_filter_errors_total", ())] == 1  # the failed file
    assert after[("ironic_pxe_filter_repairs_total", ())] == 2
    assert after[("ironic_pxe_filter_dnsmasq_reloads_total", ())] == 1
    assert after[("ironic_pxe_filter_dnsmasq_running", ())] == 1
    assert after[("ironic_pxe_filter_sync_duration_seconds_count", ())] == 1
    assert after[("ironic_pxe_filter_last_sync_duration_seconds", ())] == 0.2
    assert ("ironic_pxe_filter_notifications_received_total", ()) not in after


def test_notifications_by_outcome_and_reason(tmp_path):
    status = recorder(tmp_path)
    status.notification_counts = lambda: {"received": 5, "applied": 2, "not relevant": 1,
                                          "ignored: malformed": 1, "ignored: error": 3}
    found = samples(FilterMetrics(status))
    name = "ironic_pxe_filter_notifications_total"
    assert found[("ironic_pxe_filter_notifications_received_total", ())] == 5
    assert found[(name, (("outcome", "applied"), ("reason", "")))] == 2
    assert found[(name, (("outcome", "not_relevant"), ("reason", "")))] == 1
    assert found[(name, (("outcome", "ignored"), ("reason", "malformed")))] == 1
    assert found[(name, (("outcome", "ignored"), ("reason", "error")))] == 3


def test_fail_closed_follows_the_status(tmp_path):
    status = recorder(tmp_path)
    metrics = FilterMetrics(status)
    assert samples(metrics)[("ironic_pxe_filter_fail_closed", ())] == 0
    status.set_fail_closed("the disk is full: unknown MACs are refused")
    assert samples(metrics)[("ironic_pxe_filter_fail_closed", ())] == 1
    status.set_fail_closed(None)
    assert samples(metrics)[("ironic_pxe_filter_fail_closed", ())] == 0
