"""The inspection service: accept the ramdisk's data, then process it for one node.

``accept`` is the synchronous part of ``POST /v1/continue_inspection`` (validate, early
rules, lookup or auto-discovery); ``process`` is the rest, run by a worker or in-process:
under the node's reservation, in ONE transaction, the stages of
:mod:`inspection.processing.pipeline`; then a ``deny`` broadcast for the node's MACs. A failed
run is rolled back and only ``inspect failed`` plus ``last_error`` is committed. A transient
database error (a dropped connection, a deadlock...) fails nothing: the transaction is run
again (:mod:`inspection.db.retry`), and if it keeps failing the error is raised, so that the
worker gives the callback back for a later retry.
"""

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from inspection import attempts, locking, metrics, process_identity, states
from inspection.common.untrusted import for_log
from inspection.db import retry
from inspection.db.engine import session_scope
from inspection.db.models import INSPECT_WAIT, Node
from inspection.discovery import lookup_or_discover, port_macs
from inspection.errors import BadRequest, NodeLocked, NotFound
from inspection.hooks import inventory as inv
from inspection.hooks.base import HookConfigError, InspectionHook, load_hooks
from inspection.hooks.validate_interfaces import pxe_mac
from inspection.inspect_control import fail_inspection, node_ports
from inspection.lookup import LookupData, lookup_node
from inspection.power import tasks as power_tasks
from inspection.processing import callbacks
from inspection.processing.pipeline import (
    Pipeline,
    StageFailed,
    apply_rules,
    db_error_text,
)
from inspection.reservation import reserved_node
from inspection.rules import (
    BuiltInRulesFileError,
    Rule,
    RuleRepository,
    RulesEngine,
    RuleValidationError,
    load_built_in_rules,
)
from inspection.rules.limits import Limits
from pxe_filter.broadcast import FilterNotifier, NodePorts
from pxe_filter.common.config import ConfigError
from pxe_filter.common.database import engine_from_conf
from pxe_filter.common.macs import InvalidMAC, normalize_mac

LOG = logging.getLogger(__name__)

_ZERO_MAC = "00:00:00:00:00:00"
#: Message for the ramdisk when an early rule rejects its data (details go to last_error).
REJECTED_MESSAGE = "The inspection data was rejected by the inspection rules"


#: Logged when a process judged dead by the others finishes anyway: its outcome is dropped.
_TAKEN_OVER = ("Inspection results for node %s discarded: the callback was taken over by "
               "another process while %s processed it (its heartbeat was late)")


def _no_settle(session: Session) -> bool:
    return True


@dataclass(frozen=True)
class Accepted:
    """The node the data belongs to, and the data (after the early rules) for process()."""

    node_uuid: str
    data: dict
    created: bool = False  # enrolled by auto-discovery in this call
    #: Set when the data was committed with a node enrolled by auto-discovery.
    callback_id: int | None = None
    #: The node's inspection attempt the data was accepted for (inspection.attempts).
    attempt: str | None = None


class RuleCache:
    """Stored rules with their compiled form reused while a rule is unchanged.

    Compiling costs about 0.6 ms per rule, and every run lists the rules afresh (so an
    update is seen at once). The key is the rule's whole document, not ``updated_at``, which
    MariaDB stores to the second only.
    """

    def __init__(self, repository: RuleRepository, engine: RulesEngine) -> None:
        self.repository = repository
        self.engine = engine
        self._compiled: dict[str, tuple[str, Any]] = {}
        self._lock = threading.Lock()

    def rules(self, session: Session, phase: str | None = None) -> list[Rule]:
        """Built-in and stored rules (of ``phase``, or all) in run order, compiled."""
        rules = self.repository.list(session, phase=phase)
        for rule in rules:
            if not rule.built_in:  # built-in rules are compiled once, when loaded
                self._attach(rule)
        if phase is None:
            self._prune({r.uuid for r in rules})
        return rules

    def by_phase(self, session: Session) -> dict[str, list[Rule]]:
        """All rules, grouped by phase (one query)."""
        grouped: dict[str, list[Rule]] = {}
        for rule in self.rules(session):
            grouped.setdefault(rule.phase, []).append(rule)
        return grouped

    def _attach(self, rule: Rule) -> None:
        signature = json.dumps(rule.document(), sort_keys=True, default=str)
        with self._lock:
            hit = self._compiled.get(rule.uuid)
        if hit is not None and hit[0] == signature:
            rule.compiled = hit[1]
            return
        try:
            compiled = self.engine.compiled(rule)
        except RuleValidationError:
            return  # the engine reports it (tersely for sensitive rules) when the rule runs
        with self._lock:
            self._compiled[rule.uuid] = (signature, compiled)

    def _prune(self, current: set[str]) -> None:
        with self._lock:
            for stale in set(self._compiled) - current:
                del self._compiled[stale]


def _split_body(body: Any) -> tuple[dict, dict]:
    if not isinstance(body, dict):
        raise BadRequest("The inspection data must be a JSON object")
    inventory = body.get("inventory")
    if not isinstance(inventory, dict):
        raise BadRequest("The inspection data has no 'inventory' object")
    return inventory, {k: v for k, v in body.items() if k != "inventory"}


def _interfaces(inventory: dict, limit: int) -> list[tuple[str, bool]]:
    """(MAC, has an IP address) of the inventory's interfaces with a valid MAC, loopback
    excluded (possibly none: as Ironic, a node is then found by its BMC address).

    More than ``limit`` interface records is refused before any is read: each MAC costs a
    lookup and, with discovery, a port and a file in the filter's hostsdir.
    """
    interfaces = inventory.get("interfaces")
    if interfaces is None:
        return []
    if not isinstance(interfaces, list):
        raise BadRequest("The inventory's 'interfaces' must be a list")
    if len(interfaces) > limit:
        raise BadRequest(f"The inventory lists {len(interfaces)} network interfaces, more than "
                         f"the {limit} this service accepts ([api]max_callback_interfaces)")
    result = []
    for iface in interfaces:
        if not isinstance(iface, dict) or iface.get("name") == "lo":
            continue
        try:
            mac = normalize_mac(iface.get("mac_address"))
        except InvalidMAC:
            continue
        if mac != _ZERO_MAC:
            has_ip = any(inv.ip_address(iface.get(key), key) is not None
                         for key in ("ipv4_address", "ipv6_address"))
            result.append((mac, has_ip))
    return result


class InspectionService:
    """Accepts inspection data (lookup or discovery, early rules) and processes it."""

    def __init__(self, conf: cfg.ConfigOpts, engine: Engine, notifier: FilterNotifier,
                 hooks: list[InspectionHook], built_in_rules: list[Rule], *,
                 lock_attempts: int = 3, lock_interval: float = 1.0) -> None:
        self.conf = conf
        self.engine = engine
        self.notifier = notifier
        self.owner = process_identity.of(conf)
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        self.rules_engine = RulesEngine(conf.inspection_rules.mask_secrets,
                                        limits=Limits.from_conf(conf))
        repository = RuleRepository(built_in_rules, conf.inspection_rules.default_scope)
        self.rules = RuleCache(repository, self.rules_engine)
        self.pipeline = Pipeline(conf, hooks, self.rules_engine)
        self.pending_cap = callbacks.PendingCap(conf.processing.max_pending_callbacks,
                                                conf.processing.max_pending_bytes)
        # Like Ironic's node_locked_retry_*: a short holder (a timeout check, a status
        # update) is waited for; a long one makes process() raise NodeLocked.
        self.lock_attempts = max(1, lock_attempts)
        self.lock_interval = lock_interval

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts, engine: Engine | None = None,
                  notifier: FilterNotifier | None = None) -> "InspectionService":
        """Build the service, loading hooks and built-in rules once (ConfigError if broken)."""
        try:
            hooks = load_hooks(conf)
        except HookConfigError as exc:
            raise ConfigError(str(exc)) from None
        try:
            built_in = load_built_in_rules(conf.inspection_rules.built_in_rules)
        except BuiltInRulesFileError as exc:
            # One line: start-up errors are reported as a single log line.
            raise ConfigError(f"[inspection_rules]built_in_rules: "
                              f"{' '.join(str(exc).split())}") from None
        engine = engine if engine is not None else engine_from_conf(conf)
        notifier = notifier if notifier is not None else FilterNotifier.from_conf(conf)
        return cls(conf, engine, notifier, hooks, built_in)

    # --- the synchronous part ---

    def accept(self, body: dict, node_uuid: str | None = None,
               store_discovered: bool = False) -> Accepted:
        """Validate, run the early rules, find or enroll the node.

        ``store_discovered``: commit the data with a node that discovery enrolls (its
        ``callback_id`` is then set). Raises BadRequest, NotFound/UnknownMachine (generic
        404) or NodeLocked.
        """
        inventory, plugin_data = _split_body(body)
        interfaces = _interfaces(inventory, self.conf.api.max_callback_interfaces)
        data = LookupData.build(node_uuid, [mac for mac, _ in interfaces],
                                [inventory.get("bmc_address"), inventory.get("bmc_v6address")],
                                inventory)
        with session_scope(self.sessions) as session:
            early = self.rules.rules(session, phase="early")
        try:
            apply_rules(self.rules_engine, early, "early", inventory=inventory,
                        plugin_data=plugin_data, node=None)
        except StageFailed as exc:
            self._fail_early(data, str(exc))
            raise BadRequest(REJECTED_MESSAGE) from None
        accepted = {**plugin_data, "inventory": inventory}
        self.pending_cap.check(self.engine, callbacks.data_size(accepted))
        pxe = pxe_mac(inventory)
        found = lookup_or_discover(self.engine, self.conf, data, pxe,
                                   accepted if store_discovered else None,
                                   ports=port_macs(self.conf.inspector.add_ports,
                                                   interfaces, pxe))
        attempt = None if found.created else self._unlocked_attempt(found.node_id)
        LOG.info("Inspection data accepted for node %s%s", found.node_uuid,
                 " (auto-discovered)" if found.created else "")
        return Accepted(found.node_uuid, accepted, created=found.created,
                        callback_id=found.callback_id, attempt=attempt)

    def _unlocked_attempt(self, node_id: int) -> str | None:
        """The node's inspection attempt; NodeLocked while someone holds the node."""
        with session_scope(self.sessions) as session:
            node = session.get(Node, node_id)
            if node is None:
                return None  # deleted meanwhile: processing will say so
            holder, attempt = node.reservation, attempts.current(node)
        if holder is not None:
            LOG.info("Node %s is locked by %s: the ramdisk is told to retry", node_id, holder)
            raise NodeLocked(node_id, holder)
        return attempt

    def _fail_early(self, data: LookupData, message: str) -> None:
        """Record an early rule's failure on the node the data belongs to, if any."""
        try:
            with session_scope(self.sessions) as session:
                node_id = lookup_node(session, data).id
        except NotFound:
            LOG.warning("Early inspection rules rejected data (%s) that belongs to no "
                        "waiting node: %s", data.describe(), for_log(message))
            return
        ports = self._under_reservation(node_id, self._fail_waiting, message)
        if ports is not None:
            self.notifier.announce(ports)

    def _fail_waiting(self, session: Session, node: Node, message: str) -> NodePorts | None:
        if node.provision_state != INSPECT_WAIT:
            LOG.info("Node %s left %r meanwhile; early rule failure not recorded: %s",
                     node.uuid, INSPECT_WAIT, for_log(message))
            return None
        LOG.warning("Inspection of node %s failed: %s", node.uuid, for_log(message))
        return fail_inspection(session, node, message)

    # --- the asynchronous part ---

    @metrics.timed_processing
    def process(self, node_uuid: str, data: dict,
                settle: Callable[[Session], bool] | None = None,
                attempt: str | None = None) -> None:
        """Process accepted data for the node; failures are recorded on the node.

        ``settle(session)`` runs in the transaction that commits the outcome (e.g. deleting
        the stored callback); False from it discards the outcome. Data accepted for an
        ``attempt`` other than the node's current inspection is dropped. Raises only for
        infrastructure problems: the database, or NodeLocked when another process holds the
        node longer than the retries wait.
        """
        try:
            inventory, plugin_data = _split_body(data)
        except BadRequest as exc:
            LOG.error("Not processing data for node %s: %s", for_log(node_uuid), exc)
            return
        node_id = retry.call(self._node_id, node_uuid, what=f"looking up node {node_uuid}")
        if node_id is None:
            LOG.warning("Not processing inspection data for node %s: it was deleted",
                        node_uuid)
            return
        ports = self._under_reservation(node_id, self._process_node, (inventory, plugin_data),
                                        settle or _no_settle, attempt)
        if ports is not None:
            self.notifier.announce(ports)

    def _node_id(self, node_uuid: str) -> int | None:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(Node.id).where(Node.uuid == node_uuid)).scalar()

    def give_up(self, node_uuid: str, message: str,
                settle: Callable[[Session], bool], attempt: str | None = None) -> None:
        """Fail the node's inspection with ``message`` instead of processing its data (data
        that kept killing the processes that processed it)."""
        node_id = retry.call(self._node_id, node_uuid, what=f"looking up node {node_uuid}")
        if node_id is None:
            return
        ports = self._under_reservation(node_id, self._give_up_node, message, settle, attempt)
        if ports is not None:
            self.notifier.announce(ports)

    def _give_up_node(self, session: Session, node: Node, message: str,
                      settle: Callable[[Session], bool],
                      attempt: str | None) -> NodePorts | None:
        if not states.processable(node)[0] or not attempts.is_current(node, attempt):
            settle(session)  # processed, aborted or inspected again meanwhile
            return None
        if not settle(session):
            session.rollback()
            return None
        return fail_inspection(session, node, message)

    def _under_reservation(self, node_id: int, func, *args: Any) -> Any:
        """``func(session, node, *args)`` in one transaction under the node's reservation.

        A transient database error (:func:`inspection.db.retry.is_transient`) runs the
        transaction again, with backoff; after the last try it is raised, for the caller
        to retry later. ``func`` must raise such errors, never record them on the node.
        """
        what = f"the transaction of node {node_id}"
        for attempt in range(1, self.lock_attempts + 1):
            reserved = False
            try:
                with reserved_node(self.engine, self.owner, node_id, hold_session=False):
                    reserved = True
                    return retry.call(self._in_transaction, node_id, func, *args, what=what)
            except NodeLocked:
                if reserved or attempt == self.lock_attempts:
                    raise
                time.sleep(self.lock_interval)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _in_transaction(self, node_id: int, func, *args: Any) -> Any:
        with session_scope(self.sessions) as session:
            node = session.get(Node, node_id)
            if node is None:
                LOG.warning("Node %s was deleted before its data could be processed", node_id)
                return None
            return func(session, node, *args)

    def _process_node(self, session: Session, node: Node, data: tuple[dict, dict],
                      settle: Callable[[Session], bool],
                      attempt: str | None) -> NodePorts | None:
        inventory, plugin_data = data
        ok, why = states.processable(node)
        if ok and not attempts.is_current(node, attempt):
            ok, why = False, ("the data was accepted for an earlier inspection (aborted, "
                              "timed out or started again since)")
        if not ok:
            LOG.warning("Not processing inspection data for node %s: %s", node.uuid, why)
            metrics.processed("skipped")
            settle(session)
            return None
        node_id, node_uuid = node.id, node.uuid
        rules = self.rules.by_phase(session)
        try:
            self.pipeline.run(session, node, inventory, plugin_data, rules)
            power_tasks.end_inspection(node)  # a machine this service booted powers off
            ports = node_ports(session, node)
            if not locking.still_held(session, node_id, self.owner):
                # Held so long that the timeout task judged us dead and failed the node:
                # its verdict stands, ours is discarded.
                session.rollback()
                LOG.warning("Inspection results for node %s discarded: its reservation by "
                            "%s was taken away while processing (inspect-wait timeout, or "
                            "this process judged dead?)", node_uuid, self.owner)
                return None
            if not settle(session):
                session.rollback()
                LOG.warning(_TAKEN_OVER, node_uuid, self.owner)
                return None
            session.commit()
        except StageFailed as exc:
            message = str(exc)
        except sa.exc.SQLAlchemyError as exc:  # the commit itself
            if not retry.is_data_error(exc):
                session.rollback()
                raise  # the database's trouble, not the data's: tried again
            LOG.warning("Node %s: saving the inspection results failed: %s", node_uuid,
                        for_log(str(exc), 4000))
            message = f"Failed to save the inspection results: {db_error_text(exc)}"
        else:
            LOG.info("Inspection of node %s finished; state %s", node_uuid,
                     node.provision_state)
            metrics.processed("finished")
            return ports
        session.rollback()
        node = session.get(Node, node_id)
        if node is None:
            return None
        if not settle(session):
            session.rollback()
            LOG.warning(_TAKEN_OVER, node_uuid, self.owner)
            return None
        LOG.warning("Inspection of node %s failed: %s", node_uuid, for_log(message))
        metrics.processed("failed")
        return fail_inspection(session, node, message)
