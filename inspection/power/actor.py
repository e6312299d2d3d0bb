"""The BMC actor: does the BMC work recorded on nodes (:mod:`.tasks`), in the worker or in
the API all-in-one, as processing does.

A scheduler thread looks for due work every ``[bmc]poll_interval`` seconds (or when woken)
and hands each node to a thread of a pool of ``[bmc]max_sessions``, at most
``[bmc]max_sessions_per_bmc`` per BMC address (so a slow or dead BMC never takes the whole
pool). Each step holds the node's reservation, so two processes never drive one BMC at once
(with no database session open while the BMC answers), and is short: one verification, one
boot request, one power request, one power state read, or one out-of-band inspection (the
inventory read, then processed by the injected ``inspector``). A power change is then
confirmed by later reads, without holding a session while the machine obeys.
"""

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from inspection import process_identity, states
from inspection.common.untrusted import last_error_text
from inspection.db.engine import session_scope
from inspection.db.models import INSPECTING, VERIFYING, Node, utcnow
from inspection.errors import NodeLocked
from inspection.inspect_control import fail_inspection
from inspection.power import drivers, tasks
from inspection.power.errors import BmcError
from inspection.power.pool import SessionPool, Stopping
from inspection.power.redfish_inventory import Reading
from inspection.reservation import reserved_node
from pxe_filter.broadcast import FilterNotifier, NodePorts
from pxe_filter.common.database import error_reason

LOG = logging.getLogger(__name__)

#: Processes an inventory read from the BMC (out-of-band inspection) in the step's session:
#: the node ends ``manageable`` or ``inspect failed``; returns its ports for the filters.
OutOfBandInspector = Callable[[Session, Node, Reading], NodePorts | None]


def _candidates():
    return (sa.select(Node).where(
        Node.reservation.is_(None), Node.driver.in_(sorted(drivers.REQUIRED)),
        sa.or_(Node.provision_state.in_((VERIFYING, INSPECTING)),
               Node.target_power_state.is_not(None))).order_by(Node.id))


class PowerActor:
    """Does pending BMC work of nodes; ``wake()`` after recording some."""

    def __init__(self, engine: Engine, conf: cfg.ConfigOpts, notifier: FilterNotifier,
                 pool: SessionPool | None = None,
                 inspector: OutOfBandInspector | None = None) -> None:
        self.engine, self.conf, self.notifier = engine, conf, notifier
        self.owner = process_identity.of(conf)
        self.pool = pool or SessionPool(conf)
        self.interval = conf.bmc.poll_interval
        self.change_timeout = conf.bmc.power_state_change_timeout
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        self._executor = ThreadPoolExecutor(self.pool.size, thread_name_prefix="bmc")
        self.inspector = inspector
        self.per_bmc = conf.bmc.max_sessions_per_bmc
        self._busy: dict[int, str] = {}  # node id -> its BMC (drivers.bmc_key)
        self._bmc_busy: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the scheduler thread."""
        self._thread = threading.Thread(target=self._loop, name="bmc-scheduler", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Look for due work now."""
        self._wake.set()

    def stop(self, timeout: float | None = 30) -> None:
        """Stop scheduling; a BMC call in progress finishes, retries do not start (what is
        left stays recorded on the node for the next start)."""
        self._stop.set()
        self.pool.stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.schedule()
            except sa.exc.SQLAlchemyError as exc:
                LOG.warning("Looking for BMC work failed, the database did not answer (%s); "
                            "retrying in %s s", error_reason(exc), self.interval)
            except Exception:
                LOG.exception("Looking for BMC work failed; retrying in %s s", self.interval)
            self._wake.wait(self.interval)
            self._wake.clear()

    def schedule(self) -> int:
        """Hand every node with due work to the pool; returns how many."""
        now = time.time()
        with session_scope(self.sessions) as session:
            due = [(n.id, drivers.bmc_key(n.driver, n.driver_info))
                   for n in session.scalars(_candidates()) if tasks.due(n, now)]
        started = 0
        for node_id, bmc in due:
            with self._lock:
                if node_id in self._busy or self._stop.is_set():
                    continue
                if self._bmc_busy[bmc] >= self.per_bmc:
                    continue  # its BMC is busy enough: the next look takes it
                self._busy[node_id] = bmc
                self._bmc_busy[bmc] += 1
            self._executor.submit(self._run, node_id)
            started += 1
        return started

    def _run(self, node_id: int) -> None:
        try:
            self.step(node_id)
        except NodeLocked:
            LOG.debug("Node %s is reserved; its BMC work waits for the next look", node_id)
        except Stopping:
            LOG.info("Stopping: the BMC work of node %s stays recorded for the next start",
                     node_id)
        except sa.exc.SQLAlchemyError as exc:
            LOG.warning("BMC work on node %s not recorded, the database did not answer (%s); "
                        "retried at the next look", node_id, error_reason(exc))
        except Exception:
            LOG.exception("BMC work on node %s failed unexpectedly; retried at the next look",
                          node_id)
        finally:
            with self._lock:
                bmc = self._busy.pop(node_id)
                self._bmc_busy[bmc] -= 1
                if not self._bmc_busy[bmc]:
                    del self._bmc_busy[bmc]
        self.wake()  # a step may leave more work (a power change to confirm soon)

    def step(self, node_id: int) -> None:
        """One piece of the node's BMC work, under its reservation; the BMC is called
        between two short sessions, never with one open."""
        with reserved_node(self.engine, self.owner, node_id, notifier=self.notifier,
                           hold_session=False) as task:
            with task.change() as node:
                if not tasks.due(node):
                    return
                action = tasks.pending(node)["action"]  # due: there is one
                # The node may have been edited since inspect was accepted.
                problem = self._out_of_band_problem(node) if action == tasks.INSPECT else None
            # The node read is detached but loaded: enough to drive its BMC.
            result, error = (None, None) if problem else self._call(node, action)
            with task.change() as node:
                if not tasks.due(node) or tasks.pending(node)["action"] != action:
                    return
                if action == tasks.VERIFY:
                    self._verify(node, result, error)
                elif action in (tasks.BOOT, tasks.INSPECT):
                    ports = (self._boot if action == tasks.BOOT else self._inspect)(
                        task.session, node, result, error or problem)
                    if ports is not None:
                        task.announce(ports)
                else:
                    self._power(node, result, error)

    def _bmc(self, node: Node, work, what: str):
        return self.pool.run(node.driver, node.driver_info, work,
                             what=f"{what} of node {node.uuid}")

    def _call(self, node: Node, action: str) -> tuple[Any, BmcError | None]:
        """The BMC request ``action`` asks for now: (its result, None) or (None, error)."""
        if action == tasks.VERIFY:
            work, what = (lambda c: c.power_state()), "Verifying the BMC"
        elif action == tasks.BOOT:
            work, what = self._boot_work(node), "Booting for inspection"
        elif action == tasks.INSPECT:
            work, what = (lambda c: c.inventory()), "Reading the inventory"
        elif "deadline" not in tasks.pending(node):
            work, what = (lambda c: c.set_power(action)), f"Power action {action!r}"
        else:
            work, what = (lambda c: c.power_state()), "Power state read"
        try:
            return self._bmc(node, work, what), None
        except BmcError as exc:
            return None, exc

    def _verify(self, node: Node, state: str | None, error: BmcError | None) -> None:
        tasks.step_done(node)
        if error is not None:
            states.apply(node, states.FAIL)
            node.last_error = last_error_text(
                f"Failed to verify the BMC of node {node.uuid} (power state read): {error}")
            LOG.warning("Node %s stays in enroll: %s", node.uuid, node.last_error)
            return
        node.power_state = state
        states.apply(node, states.DONE)
        node.last_error = None
        LOG.info("Node %s verified (%s): now manageable", node.uuid, state)

    @staticmethod
    def _boot_work(node: Node) -> Callable[[drivers.BmcClient], str]:
        device = drivers.boot_device(node.boot_interface)
        mode = drivers.boot_mode(node.boot_mode, node.properties)
        reboot_only = bool(node.disable_power_off)

        def boot(client: drivers.BmcClient) -> str:
            client.set_boot_once(device, mode)
            action = drivers.REBOOT if reboot_only or \
                client.power_state() == drivers.POWER_ON else drivers.POWER_ON
            client.set_power(action)
            return action

        return boot

    def _boot(self, session: Session, node: Node, action: str | None,
              error: BmcError | None) -> NodePorts | None:
        tasks.step_done(node)
        if error is not None:
            # A BMC that just failed is not asked to power off as well.
            node.driver_internal_info = {k: v for k, v in (node.driver_internal_info or {})
                                         .items() if k != tasks.POWER_OFF_KEY}
            LOG.warning("Inspection of node %s failed: cannot boot it: %s", node.uuid, error)
            return fail_inspection(session, node, f"Failed to boot node {node.uuid} from the "
                                                  f"network for inspection: {error}")
        states.apply(node, states.WAIT)
        node.inspection_started_at = utcnow()  # the ramdisk's time starts at power on
        tasks.sent(node, action, self.change_timeout, self.interval)
        LOG.info("Node %s boots from %s for inspection (%s)", node.uuid,
                 drivers.boot_device(node.boot_interface), action)
        return None

    def _out_of_band_problem(self, node: Node) -> str | None:
        if self.inspector is None:
            return "it is not available in this process"
        return tasks.out_of_band_problem(node)

    def _inspect(self, session: Session, node: Node, reading: Reading | None,
                 error: BmcError | str | None) -> NodePorts | None:
        """Out-of-band inspection: the inventory read (GET requests only), processed."""
        if isinstance(error, str):
            tasks.step_done(node)
            return fail_inspection(session, node, f"Node {node.uuid} cannot be inspected "
                                                  f"out-of-band: {error}")
        if error is not None:
            tasks.step_done(node)
            LOG.warning("Out-of-band inspection of node %s failed: %s", node.uuid, error)
            return fail_inspection(session, node, f"Failed to read the inventory of node "
                                                  f"{node.uuid} from its BMC: {error}")
        assert self.inspector is not None
        return self.inspector(session, node, reading)

    def _power(self, node: Node, result: str | None, error: BmcError | None) -> None:
        task = tasks.pending(node)
        action = task["action"]
        if "deadline" not in task:
            if error is not None:
                self._power_failed(node, f"Failed to change power state to {action!r}: "
                                         f"{error}")
                return
            tasks.sent(node, action, self.change_timeout, self.interval)
            return
        want = drivers.END_STATE[action]
        if error is not None:
            self._power_failed(node, f"Failed to read the power state after {action!r}: "
                                     f"{error}")
            return
        state = result
        if state == want:
            tasks.finish(node, state)
            LOG.info("Node %s is in %s", node.uuid, state)
        elif time.time() > float(task["deadline"]):
            tasks.finish(node, state)
            allowed = task.get("timeout") or self.change_timeout
            self._power_failed(node, f"Timed out after {allowed} s waiting for "
                                     f"the power state {want!r} ({action}); the BMC reports "
                                     f"{state!r}")
        else:
            node.power_state = state
            task = {**task, "next": time.time() + self.interval}
            node.driver_internal_info = {**(node.driver_internal_info or {}),
                                         tasks.TASK_KEY: task}

    def _power_failed(self, node: Node, message: str) -> None:
        tasks.finish(node, None)
        # Keep why an inspection failed: the power problem comes in addition.
        previous = node.last_error if node.provision_state == "inspect failed" else None
        node.last_error = last_error_text(f"{previous}; then: {message}" if previous
                                          else message)
        LOG.warning("Node %s: %s", node.uuid, message)
