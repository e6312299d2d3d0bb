"""The daemon's Prometheus metrics (``ironic_pxe_filter_*``).

Most are read at scrape time from the figures the daemon keeps for ``ironic-pxe-filter
status`` (:class:`pxe_filter.status.recorder.StatusRecorder`), so the two never disagree;
only what the status does not accumulate (sync durations, files written, broadcast
entries) is counted here, by the daemon calling :meth:`FilterMetrics.sync` and
:meth:`FilterMetrics.broadcast`.
"""

import datetime
from collections.abc import Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pxe_filter.common.prometheus import new_registry
from pxe_filter.status.recorder import StatusRecorder

PREFIX = "ironic_pxe_filter_"
#: Full syncs take milliseconds (small sites) to seconds (100,000 ports).
SYNC_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class StatusCollector(Collector):
    """Exports the status figures as they are at scrape time."""

    def __init__(self, status: StatusRecorder) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        """One metric family per figure of the status."""
        data = self.status.snapshot()
        yield _gauge("ready", "1 once the first full sync is done", int(bool(data["ready"])))
        yield _counter("syncs", "Full syncs done", data["syncs"])
        last = data["last_sync"]
        if last:
            yield _gauge("last_sync_timestamp_seconds", "When the last full sync ended",
                         datetime.datetime.fromisoformat(last["at"]).timestamp())
            yield _gauge("last_sync_duration_seconds", "How long the last full sync took",
                         last["duration_s"])
        yield _gauge("allowed_macs", "MACs whose file serves them (held policy)",
                     data["allowed"])
        yield _gauge("denied_macs", "MACs whose file refuses them (held policy)",
                     data["denied"])
        if data.get("wildcard") is not None:
            yield _gauge("unknown_macs_allowed", "1 if MACs without a file of their own are "
                         "served (the wildcard file)", int(data["wildcard"] == "allow"))
        yield _counter("repairs", "Files put back after someone else changed them",
                       data["repaired"])
        yield _counter("errors", "Errors counted in the status (failed syncs, writes, "
                       "dnsmasq control)", data["errors"]["count"])
        dnsmasq = data["dnsmasq"]
        yield _counter("dnsmasq_reloads", "dnsmasq reloads (SIGHUP) done by the daemon",
                       dnsmasq["reloads"])
        yield _counter("dnsmasq_restarts", "Restarts of a dnsmasq that exited",
                       dnsmasq["restarts"])
        if "running" in dnsmasq:
            yield _gauge("dnsmasq_running", "1 if the dnsmasq the daemon controls runs",
                         int(bool(dnsmasq["running"])))
        yield _gauge("fail_closed", "1 while the filter fails closed: a denial could not be "
                     "written, so unknown MACs are refused or dnsmasq is stopped",
                     int(bool(data["fail_closed"])))
        counts = data.get("notifications")
        if counts is not None:
            yield _counter("notifications_received", "Ironic notifications received",
                           counts.get("received", 0))
            handled = CounterMetricFamily(
                PREFIX + "notifications", "Ironic notifications by outcome (applied: nodes and "
                "ports re-read and applied, not_relevant, ignored) and why",
                labels=["outcome", "reason"])
            handled.add_metric(["applied", ""], counts.get("applied", 0))
            handled.add_metric(["not_relevant", ""], counts.get("not relevant", 0))
            for key, value in sorted(counts.items()):
                if key.startswith("ignored: "):  # the follower's reasons are label values
                    handled.add_metric(["ignored", key.removeprefix("ignored: ")], value)
            yield handled


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, value=float(value))


def _counter(name: str, doc: str, value: object) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, doc, value=float(value or 0))


class FilterMetrics:
    """The daemon's registry: the status figures plus what is counted as it happens."""

    def __init__(self, status: StatusRecorder) -> None:
        self.registry = new_registry()
        self.registry.register(StatusCollector(status))
        self.sync_duration = Histogram(
            PREFIX + "sync_duration_seconds", "Duration of full syncs (database read, "
            "policy, files written)", buckets=SYNC_BUCKETS, registry=self.registry)
        self.files_written = self._labelled(
            "files_written", "Files (re)written, by what decided it (sync, or broadcast: "
            "update_pxe_filters and Ironic notifications)", "origin", ("sync", "broadcast"))
        self.files_failed = self._labelled(
            "files_failed", "Files that could not be written (retried at the next sync), by "
            "origin", "origin", ("sync", "broadcast"))
        self.broadcasts = Counter(
            PREFIX + "broadcasts", "update_pxe_filters broadcasts received and applied",
            registry=self.registry)
        self.broadcast_macs = self._labelled(
            "broadcast_macs", "MACs in broadcasts and notifications applied, by decision "
            "(allow, deny, rejected: invalid entries)", "decision", ("allow", "deny", "rejected"))
        self.foreign_files = self._labelled(
            "foreign_files", "Files the filter did not write, found in the hostsdir, by outcome "
            "(removed; emptied: could not be deleted; failed: attempts that could do neither, "
            "dnsmasq is stopped meanwhile; gone: deleted by someone else)", "outcome",
            ("removed", "emptied", "failed", "gone"))
        self.served_denied = Counter(
            PREFIX + "served_denied", "Leases dnsmasq granted to MACs the database denied at "
            "that moment (each logged at CRITICAL and closed at once)", registry=self.registry)

    def _labelled(self, name: str, doc: str, label: str, values: tuple[str, ...]) -> Counter:
        """A counter by ``label``, each of ``values`` exported from the start (at 0)."""
        counter = Counter(PREFIX + name, doc, [label], registry=self.registry)
        for value in values:
            counter.labels(value)
        return counter

    def sync(self, result) -> None:
        """Count a full sync (a pxe_filter.sync.SyncResult)."""
        self.sync_duration.observe(result.duration)
        self.written(result, "sync")

    def written(self, result, origin: str = "broadcast") -> None:
        """Count the files a sync, a hint or the lookup it led to wrote (their result)."""
        self.files_written.labels(origin=origin).inc(result.written)
        self.files_failed.labels(origin=origin).inc(result.failed)

    def broadcast(self, result) -> None:
        """Count a broadcast or notification taken (a pxe_filter.sync.SyncResult)."""
        self.written(result)
        self.broadcast_macs.labels(decision="allow").inc(result.allowed)
        self.broadcast_macs.labels(decision="deny").inc(result.denied)
        self.broadcast_macs.labels(decision="rejected").inc(result.rejected)

    def foreign(self, report) -> None:
        """Count foreign files handled (a pxe_filter.foreign_files.ForeignReport)."""
        for outcome, names in (("removed", report.removed), ("emptied", report.neutralised),
                               ("failed", report.failed), ("gone", report.gone)):
            self.foreign_files.labels(outcome=outcome).inc(len(names))
