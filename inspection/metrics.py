"""The inspection service's Prometheus metrics (``ironic_inspection_*``), one registry per process.

The API serves them at ``GET /metrics`` (with its admin authentication), the worker on
``[worker]prometheus_port``. Processing runs where its metrics are counted: in the worker,
or in the API itself in all-in-one mode. This module stands below every layer that counts
(lookup, rules, processing), so it imports nothing of the service.
"""

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from pxe_filter.common.prometheus import new_registry

PREFIX = "ironic_inspection_"
REGISTRY = new_registry()

#: Outcomes of ``POST /v1/continue_inspection`` (the ``outcome`` label).
CALLBACK_OUTCOMES = ("accepted", "discovered", "bad_request", "not_found", "locked",
                     "rate_limited", "unavailable", "error")
#: Why a callback was refused before it was read (the ``reason`` label): its client address
#: went over [api]callback_rate, or the accepted callbacks waiting for processing are at
#: [processing]max_pending_callbacks or max_pending_bytes.
REFUSAL_REASONS = ("rate_limit", "pending_rows", "pending_bytes")
LOOKUP_METHODS = ("uuid", "mac", "bmc")
LOGIN_OUTCOMES = ("ok", "failed", "throttled", "queue_full")
CONNECTION_CLOSE_REASONS = ("per_client_limit", "request_deadline")
PROCESSED_OUTCOMES = ("finished", "failed", "skipped", "error")
#: Processing takes tens of milliseconds; a busy database or many rules make it seconds.
PROCESSING_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

CALLBACKS = Counter(
    PREFIX + "callbacks", "Ramdisk callbacks (POST /v1/continue_inspection) by outcome",
    ["outcome"], registry=REGISTRY)
CALLBACK_REFUSALS = Counter(
    PREFIX + "callback_refusals", "Ramdisk callbacks refused to protect the service, by "
    "reason (rate_limit: 429, pending_rows / pending_bytes: 503)", ["reason"],
    registry=REGISTRY)
LOOKUPS = Counter(
    PREFIX + "lookups",
    "Nodes found for inspection data, by what decided (uuid, mac, bmc, identity)",
    ["method"], registry=REGISTRY)
RULES_EVALUATED = Counter(
    PREFIX + "rules_evaluated", "Inspection rules whose conditions were evaluated, by phase",
    ["phase"], registry=REGISTRY)
RULES_MATCHED = Counter(
    PREFIX + "rules_matched", "Inspection rules whose conditions held (actions ran), by phase",
    ["phase"], registry=REGISTRY)
PROCESSED = Counter(
    PREFIX + "processed", "Inspection data processed, by outcome (finished, failed: the node "
    "records why, skipped: the node was not waiting, error: database or reservation)",
    ["outcome"], registry=REGISTRY)
PROCESSING_SECONDS = Histogram(
    PREFIX + "processing_duration_seconds", "Time to process one node's inspection data "
    "(reservation, hooks, rules, commit)", buckets=PROCESSING_BUCKETS, registry=REGISTRY)
TIMEOUTS = Counter(
    PREFIX + "timeouts", "Inspections failed because no data came within "
    "[inspector]inspect_wait_timeout (counted by the worker that failed them)",
    registry=REGISTRY)
LOGINS = Counter(
    PREFIX + "logins", "Admin requests' password checks by outcome (ok: also remembered "
    "credentials; failed; throttled: that user failed too often from that address; "
    "queue_full: no turn in the password check queue)", ["outcome"], registry=REGISTRY)
CONNECTIONS_CLOSED = Counter(
    PREFIX + "connections_closed", "Client connections the API closed, by reason "
    "(per_client_limit: [api]connections_per_client; connection_limit and "
    "connection_reserve: [api]connection_limit and connection_reserve; request_deadline: "
    "[api]request_deadline)", ["reason"], registry=REGISTRY)
IN_PROGRESS = Gauge(
    PREFIX + "processing_in_progress", "Inspection data being processed right now",
    registry=REGISTRY)

F = TypeVar("F", bound=Callable[..., Any])


def timed_processing(func: F) -> F:
    """Decorate the processing entry point: duration, in progress, errors it raises."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        IN_PROGRESS.inc()
        try:
            return func(*args, **kwargs)
        except Exception:
            PROCESSED.labels(outcome="error").inc()
            raise
        finally:
            IN_PROGRESS.dec()
            PROCESSING_SECONDS.observe(time.monotonic() - started)
    return wrapper  # type: ignore[return-value]


def processed(outcome: str) -> None:
    """Count one processing run that ended with ``outcome`` (see PROCESSED_OUTCOMES)."""
    PROCESSED.labels(outcome=outcome).inc()


def show_processing() -> None:
    """Make the processing outcomes appear (at zero) in a process that processes."""
    for outcome in PROCESSED_OUTCOMES:
        PROCESSED.labels(outcome=outcome)
    for phase in ("preprocess", "main"):
        show_rules(phase)


def show_rules(phase: str) -> None:
    """Make the rule counters of ``phase`` appear (at zero) where that phase runs."""
    RULES_EVALUATED.labels(phase=phase)
    RULES_MATCHED.labels(phase=phase)

#: Why BMC requests failed (the ``kind`` label of BMC_FAILURES).
BMC_FAILURE_KINDS = ("auth", "unreachable", "timeout", "invalid", "unsupported", "error")
BMC_REQUESTS = Counter(
    PREFIX + "bmc_requests", "BMC work (Redfish or IPMI: open a session, then read or change "
    "power or boot) by hardware type and outcome (ok, failed after its retries)",
    ["driver", "outcome"], registry=REGISTRY)
BMC_FAILURES = Counter(
    PREFIX + "bmc_failures", "Failed BMC attempts, retries included, by hardware type and "
    "kind (auth, unreachable, timeout, invalid, unsupported, error)",
    ["driver", "kind"], registry=REGISTRY)
BMC_SESSIONS = Gauge(
    PREFIX + "bmc_sessions_open", "BMC sessions open right now (at most [bmc]max_sessions)",
    registry=REGISTRY)
