"""``GET /metrics``: the process's metrics in Prometheus text format (admin authentication).

Also counts the ramdisk callbacks by outcome, from the status code each one got, and adds
two figures read at scrape time: nodes per provision state, and the callbacks accepted
(stored in the database) and not processed yet.
"""

import logging
from collections.abc import Iterator

import sqlalchemy as sa
from flask import Blueprint, Flask, Response, g, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from inspection import metrics
from inspection.api.context import EXTENSION, ApiContext, ctx
from inspection.api.dispatch import InProcessDispatcher
from inspection.db.models import Node
from inspection.processing import callbacks

bp = Blueprint("metrics", __name__)
LOG = logging.getLogger("inspection.api.metrics")

CALLBACK_ENDPOINT = "continue_inspection.continue_inspection"
_OUTCOMES = {400: "bad_request", 413: "bad_request", 415: "bad_request", 404: "not_found",
             409: "locked", 429: "rate_limited", 503: "unavailable"}


def callback_outcome(status: int, discovered: bool) -> str:
    """The ``outcome`` label of a callback answered with ``status``."""
    if status < 300:
        return "discovered" if discovered else "accepted"
    return _OUTCOMES.get(status, "error")


class ApiCollector(Collector):
    """Figures read when scraped: nodes per provision state, the stored callbacks."""

    def __init__(self, context: ApiContext) -> None:
        self.context = context

    def collect(self) -> Iterator[Metric]:
        """Query the database once; a database error leaves the nodes figure out."""
        context = self.context
        nodes = GaugeMetricFamily(metrics.PREFIX + "nodes", "Nodes by provision state",
                                  labels=["provision_state"])
        try:
            with context.engine.connect() as conn:
                rows = conn.execute(sa.select(Node.provision_state, sa.func.count())
                                    .group_by(Node.provision_state)).all()
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Metrics: nodes not counted: %s", type(exc).__name__)
        else:
            for state, count in rows:
                nodes.add_metric([state or ""], count)
            yield nodes
        try:
            pending = callbacks.count(context.engine)
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("Metrics: stored callbacks not counted: %s", type(exc).__name__)
        else:
            yield GaugeMetricFamily(
                metrics.PREFIX + "processing_backlog", "Callbacks accepted (stored in the "
                "database) and not processed yet, by any process", value=pending)


@bp.get("/metrics")
def serve_metrics() -> Response:
    """Every metric of this process (the API's own, and processing in all-in-one mode)."""
    local = CollectorRegistry()
    local.register(ApiCollector(ctx()))
    body = generate_latest(metrics.REGISTRY) + generate_latest(local)
    return Response(body, mimetype=None, headers={"Content-Type": CONTENT_TYPE_LATEST})


def install(app: Flask) -> None:
    """Serve ``/metrics`` and count the callbacks; the outcomes start at zero."""
    for outcome in metrics.CALLBACK_OUTCOMES:
        metrics.CALLBACKS.labels(outcome=outcome)
    for reason in metrics.REFUSAL_REASONS:
        metrics.CALLBACK_REFUSALS.labels(reason=reason)
    for method in metrics.LOOKUP_METHODS:
        metrics.LOOKUPS.labels(method=method)
    for outcome in metrics.LOGIN_OUTCOMES:
        metrics.LOGINS.labels(outcome=outcome)
    for reason in metrics.CONNECTION_CLOSE_REASONS:
        metrics.CONNECTIONS_CLOSED.labels(reason=reason)
    metrics.show_rules("early")  # early rules run in the API's request
    if isinstance(app.extensions[EXTENSION].dispatcher, InProcessDispatcher):
        metrics.show_processing()  # all-in-one: this process processes

    @app.after_request
    def count_callback(response: Response) -> Response:
        if request.endpoint == CALLBACK_ENDPOINT:
            outcome = callback_outcome(response.status_code, g.get("discovered", False))
            metrics.CALLBACKS.labels(outcome=outcome).inc()
        return response

    app.register_blueprint(bp)
