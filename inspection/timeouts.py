"""The periodic task that fails inspections waiting too long for the ramdisk's data.

Safe in several processes at once (the HA spec's singleton task without a leader election):
each candidate node is reserved first, nodes reserved by anyone else are skipped until the
next run, and the state and start time are checked again under the reservation, so a node
that was processed or restarted meanwhile is left alone.
"""

import functools
import logging
from datetime import datetime, timedelta

import sqlalchemy.exc
from oslo_config import cfg
from sqlalchemy import and_, or_, select
from sqlalchemy.engine import Engine

from inspection import attempts, metrics, process_identity
from inspection.common.periodic import PeriodicTask
from inspection.db import retry
from inspection.db.models import INSPECT_WAIT, INSPECTING, Node, utcnow
from inspection.errors import NodeLocked, NotFound
from inspection.inspect_control import fail_inspection
from inspection.power import tasks as power_tasks
from inspection.reservation import reserved_node
from pxe_filter.broadcast import FilterNotifier
from pxe_filter.common.database import error_reason

LOG = logging.getLogger(__name__)


def _started(node: Node) -> datetime | None:
    # Nodes put in inspect wait by older tools may lack inspection_started_at.
    return node.inspection_started_at or node.updated_at or node.created_at


def _timed_out_filter(cutoff: datetime):
    # inspecting: a node this service was to boot, while no process did its BMC work.
    return and_(Node.provision_state.in_((INSPECT_WAIT, INSPECTING)),
                or_(Node.inspection_started_at < cutoff,
                    and_(Node.inspection_started_at.is_(None),
                         or_(Node.updated_at < cutoff,
                             and_(Node.updated_at.is_(None), Node.created_at < cutoff)))))


def _waiting(node: Node) -> bool:
    # Only our own inspecting nodes: in a database shared with Ironic, its conductors
    # drive theirs.
    if node.provision_state == INSPECTING:
        task = power_tasks.pending(node)
        return task is not None and task["action"] in (power_tasks.BOOT, power_tasks.INSPECT)
    return node.provision_state == INSPECT_WAIT


def fail_timed_out(engine: Engine, conf: cfg.ConfigOpts, notifier: FilterNotifier,
                   now: datetime | None = None) -> list[str]:
    """Fail every node in ``inspect wait`` for longer than the timeout; returns their UUIDs."""
    timeout = conf.inspector.inspect_wait_timeout
    if not timeout:
        return []
    now = now or utcnow()
    cutoff = now - timedelta(seconds=timeout)
    with engine.connect() as conn:
        candidates = conn.execute(select(Node.id).where(_timed_out_filter(cutoff),
                                                        Node.reservation.is_(None))
                                  .order_by(Node.id)).scalars().all()
    failed: list[str] = []
    for node_id in candidates:
        try:
            node_uuid = retry.call(functools.partial(
                _fail_one, engine, conf, notifier, node_id, cutoff=cutoff, timeout=timeout),
                what=f"the inspection timeout of node {node_id}")
        except (NodeLocked, NotFound):
            LOG.debug("Inspection timeout: node %s is busy or gone; next run", node_id)
            continue
        except sqlalchemy.exc.SQLAlchemyError as exc:
            if not retry.is_transient(exc):
                LOG.exception("Inspection timeout: could not fail node %s", node_id)
                continue
            LOG.warning("Inspection timeout: node %s not failed now (%s); next run", node_id,
                        error_reason(exc))
            continue
        except Exception:
            # One broken node must not stop the others from timing out.
            LOG.exception("Inspection timeout: could not fail node %s", node_id)
            continue
        if node_uuid:
            failed.append(node_uuid)
    return failed


def _fail_one(engine: Engine, conf: cfg.ConfigOpts, notifier: FilterNotifier, node_id: int,
              *, cutoff: datetime, timeout: int) -> str | None:
    with reserved_node(engine, process_identity.of(conf), node_id, notifier=notifier) as task:
        node = task.node
        started = _started(node)
        if not _waiting(node) or started is None or started >= cutoff:
            return None  # processed or restarted since the query
        message = (f"Timeout reached while inspecting the node: no inspection data "
                   f"processed within {timeout} seconds of the start of inspection at "
                   f"{started.isoformat(sep=' ', timespec='seconds')} UTC")
        if node.provision_state == INSPECTING:
            message = (f"Timeout reached while booting the node for inspection: its BMC "
                       f"was not driven within {timeout} seconds of the start of "
                       f"inspection at {started.isoformat(sep=' ', timespec='seconds')} UTC "
                       f"(is an ironic-inspection-worker running?)")
        task.announce(fail_inspection(task.session, node, message))
        # Data stored but not processed in time does not keep the node waiting: the
        # timeout counts from the start of the inspection, whatever arrives meanwhile.
        attempts.discard_callbacks(task.session, node.uuid)
        node_uuid = node.uuid
    LOG.warning("Node %s: %s", node_uuid, message)
    metrics.TIMEOUTS.inc()
    return node_uuid


def timeout_interval(conf: cfg.ConfigOpts) -> float:
    """Seconds between timeout passes: a tenth of the timeout, between 1 s and 60 s."""
    timeout = conf.inspector.inspect_wait_timeout or 600
    return float(min(60, max(1, timeout // 10)))


class TimeoutTask(PeriodicTask):
    """Runs :func:`fail_timed_out` every ``interval`` seconds until stopped."""

    thread_name = "inspect-wait-timeout"

    def __init__(self, engine: Engine, conf: cfg.ConfigOpts, notifier: FilterNotifier,
                 interval: float = 60.0) -> None:
        super().__init__(interval)
        self.engine, self.conf, self.notifier = engine, conf, notifier

    @classmethod
    def from_conf(cls, engine: Engine, conf: cfg.ConfigOpts,
                  notifier: FilterNotifier) -> "TimeoutTask":
        """The task run every :func:`timeout_interval` seconds."""
        return cls(engine, conf, notifier, interval=timeout_interval(conf))

    def run_once(self) -> list[str]:
        """One pass; errors are logged, never raised, so the loop survives a database blip."""
        try:
            return fail_timed_out(self.engine, self.conf, self.notifier)
        except Exception:
            LOG.exception("Inspection timeout task failed; retrying in %s s", self.interval)
            return []
