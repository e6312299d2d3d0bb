"""The stages that turn a node's inspection data into node, port and inventory changes.

Order: preprocess hooks -> preprocess rules -> hooks -> main rules -> store the inventory ->
move the node on. Every stage works in the caller's session and nothing is committed here;
a stage that fails raises :class:`StageFailed` whose message becomes the node's
``last_error``, and the caller rolls the whole run back. Only data errors of the database
(:func:`inspection.db.retry.is_data_error`) fail a stage; any other database error is
raised as it is, for the caller to retry the run. (Early rules, lookup and discovery
happen before, in :meth:`inspection.processing.service.InspectionService.accept`.)
"""

import logging
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy.exc
from oslo_config import cfg
from sqlalchemy.orm import Session

from inspection import bmc, identity, states
from inspection.common.untrusted import for_log
from inspection.db.models import Node, utcnow
from inspection.db.retry import is_data_error
from inspection.discovery import DEFAULT_INSPECT_INTERFACE
from inspection.hooks.base import (
    InspectionHook,
    InspectionHookError,
    RamdiskError,
    run_hooks,
    run_preprocess,
)
from inspection.hooks.context import InspectionContext
from inspection.processing import store
from inspection.rules import (
    InspectionFailed,
    OrmNode,
    Rule,
    RuleExecutionError,
    RulesEngine,
    interface_supported,
)
from inspection.rules.limits import Budget, node_size

LOG = logging.getLogger(__name__)

#: The node columns whose size [inspection_rules]max_node_size bounds.
_NODE_JSON = ("driver_info", "properties", "extra", "instance_info")

#: Longest database error text kept in last_error (the rest is in the log).
_MAX_DB_ERROR = 300
#: Longest database error logged (SQLAlchemy's text quotes the bound inventory values).
_MAX_LOGGED_DB_ERROR = 4000


class StageFailed(Exception):
    """A stage refused or could not apply the data; ``str()`` is the node's new last_error."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


def db_error_text(exc: sqlalchemy.exc.SQLAlchemyError) -> str:
    """The driver's first error line: never SQLAlchemy's SQL text and bound parameters,
    which would copy the inventory (and any secret in it) into last_error."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else type(exc).__name__).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:_MAX_DB_ERROR]


def rule_failure_message(exc: RuleExecutionError, phase: str,
                         rules: Sequence[Rule]) -> str:
    """last_error for a failed rule: the rule's (masked) message, or only its UUID when the
    rule is sensitive (its content must never show)."""
    sensitive = any(r.uuid == exc.rule_uuid and r.sensitive for r in rules)
    if isinstance(exc, InspectionFailed):
        if sensitive:
            return f"Inspection failed by sensitive inspection rule {exc.rule_uuid} " \
                   f"({phase} phase)"
        return f"Inspection failed by inspection rule {exc.rule_uuid} ({phase} phase): {exc}"
    # RuleExecutionError messages already hide a sensitive rule's arguments.
    return f"Inspection rules ({phase} phase) failed: {exc}"


def apply_rules(engine: RulesEngine, rules: Sequence[Rule], phase: str, *, inventory: dict,
                plugin_data: dict, node: OrmNode | None,
                budget: Budget | None = None) -> list[str]:
    """Run one phase of rules; :class:`StageFailed` when a rule fails inspection or breaks."""
    try:
        return engine.apply(rules, phase, inventory, plugin_data, node, budget=budget)
    except RuleExecutionError as exc:
        raise StageFailed(f"{phase} rules", rule_failure_message(exc, phase, rules)) from None


def rules_enabled(conf: cfg.ConfigOpts, node: Node) -> bool:
    """Whether rules run for this node (``[inspection_rules]supported_interfaces``).

    A node without an explicit inspect interface uses the default one (as discovered nodes do).
    """
    interface = node.inspect_interface or DEFAULT_INSPECT_INTERFACE
    return interface_supported(interface, conf.inspection_rules.supported_interfaces)


def finish(node: Node) -> None:
    """Move the node on after a successful run (:func:`inspection.states.finish`)."""
    states.finish(node)
    node.last_error = None
    node.inspection_finished_at = utcnow()
    info = dict(node.driver_internal_info or {})
    if info.pop(bmc.CACHE_KEY, None) is not None:
        node.driver_internal_info = info


class Pipeline:
    """The configured hooks and rules engine, applied to one node at a time."""

    def __init__(self, conf: cfg.ConfigOpts, hooks: Sequence[InspectionHook],
                 engine: RulesEngine) -> None:
        self.conf = conf
        self.hooks = list(hooks)
        self.engine = engine

    def run(self, session: Session, node: Node, inventory: dict, plugin_data: dict,
            rules: dict[str, list[Rule]], *, move_on: bool = True) -> InspectionContext:
        """Every stage after lookup, ending with the node moved on (all uncommitted).

        ``rules`` maps ``preprocess``/``main`` to the rules of that phase; ``move_on=False``
        leaves the node's state and inspection times alone (reprocessing stored data).
        Raises :class:`StageFailed`; the caller rolls back.
        """
        ctx = self._stage("loading the node", InspectionContext.load, session, node,
                          inventory, plugin_data, self.conf)
        with_rules = rules_enabled(self.conf, node)
        if not with_rules:
            LOG.debug("Node %s: inspect interface %s is not in [inspection_rules]"
                      "supported_interfaces; no rules run", node.uuid, node.inspect_interface)

        self._hooks("preprocess", run_preprocess, ctx)
        budget = Budget(self.engine.limits)  # both phases of this callback share it
        if with_rules:
            self._stage("preprocess rules", lambda: apply_rules(
                self.engine, rules.get("preprocess", []), "preprocess", inventory=inventory,
                plugin_data=ctx.plugin_data, node=OrmNode(session, node, ctx.edit),
                budget=budget))
        self._hooks("main", run_hooks, ctx)
        if with_rules:
            # The hooks' editor: it tracks the ports they added or deleted.
            self._stage("main rules", lambda: apply_rules(
                self.engine, rules.get("main", []), "main", inventory=inventory,
                plugin_data=ctx.plugin_data, node=OrmNode(session, node, ctx.edit),
                budget=budget))
            size = node_size({name: getattr(node, name) for name in _NODE_JSON})
            if size > self.engine.limits.max_node_size:
                raise StageFailed("main rules", f"the node would store {size} bytes of JSON "
                                                f"fields, more than [inspection_rules]"
                                                f"max_node_size = "
                                                f"{self.engine.limits.max_node_size}")
        self._stage("storing the inspection data", self._store, session, node, inventory,
                    ctx.plugin_data, move_on)
        return ctx

    def _store(self, session: Session, node: Node, inventory: dict, plugin_data: dict,
               move_on: bool) -> None:
        if node.id is None:
            session.flush()
        store.store_inventory(session, node.id, inventory, plugin_data)
        identity.record(node, inventory)  # after the rules: they cannot unset it
        if move_on:
            finish(node)
        # Flushing here surfaces constraint and type errors as this stage's failure.
        session.flush()

    def _hooks(self, phase: str, runner: Callable, ctx: InspectionContext) -> None:
        try:
            runner(self.hooks, ctx)
        except RamdiskError as exc:
            raise StageFailed("ramdisk", str(exc)) from None
        except InspectionHookError as exc:
            what = "Preprocessing" if phase == "preprocess" else "Processing"
            raise StageFailed(f"{phase} hooks",
                              f"{what} inspection data failed: {exc}") from None
        except sqlalchemy.exc.SQLAlchemyError as exc:
            if not is_data_error(exc):
                raise  # the database's trouble, not the data's: the caller retries
            LOG.warning("Node %s: database error in the %s hooks: %s", ctx.node_ident, phase,
                        for_log(str(exc), _MAX_LOGGED_DB_ERROR))
            raise StageFailed(f"{phase} hooks", f"Database error while running the "
                                                f"{phase} inspection hooks: "
                                                f"{db_error_text(exc)}") from None

    @staticmethod
    def _stage(name: str, func: Callable, *args: Any) -> Any:
        try:
            return func(*args)
        except StageFailed:
            raise
        except sqlalchemy.exc.SQLAlchemyError as exc:
            if not is_data_error(exc):
                raise  # the database's trouble, not the data's: the caller retries
            LOG.warning("Database error while %s: %s", name,
                        for_log(str(exc), _MAX_LOGGED_DB_ERROR))
            raise StageFailed(name, f"Database error while {name}: "
                                    f"{db_error_text(exc)}") from None
        except Exception as exc:
            # A bug or a data shape nobody anticipated: the node records it cleanly, the log
            # keeps the traceback.
            LOG.exception("Unexpected error while %s", name)
            raise StageFailed(name, f"Unexpected error while {name}: "
                                    f"{type(exc).__name__}: {exc}") from None

