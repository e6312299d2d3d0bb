"""Trying rules on a node's stored data without changing anything (``rule test``).

The rules run phase by phase, as processing runs them, on an in-memory copy of the node
(its ports and traits) and of the inventory and plugin data; the result is what they would
change (:mod:`inspection.rules.changes`). Nothing is logged or counted as if it had happened:
the engine's log, including the ``log`` action, goes nowhere, and the rules metrics stay.
"""

import logging
from collections.abc import Sequence
from typing import Any

from inspection.rules import changes, paths
from inspection.rules.adapters import InMemoryNode, NodeAdapter
from inspection.rules.engine import RulesEngine
from inspection.rules.errors import InspectionFailed, RuleExecutionError
from inspection.rules.limits import Budget
from inspection.rules.model import PHASES, Rule

_QUIET = logging.getLogger("inspection.rules.dry_run")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def quiet_engine(engine: RulesEngine) -> RulesEngine:
    """An engine like ``engine`` (masking, limits, actions) whose log goes nowhere and
    whose runs the rules metrics do not count."""
    quiet = RulesEngine(engine.mask_secrets, registry=engine.registry, logger=_QUIET,
                        limits=engine.limits)
    quiet.counted = False
    return quiet


def try_rules(engine: RulesEngine, rules: Sequence[Rule], inventory: dict,
              plugin_data: dict, node: NodeAdapter) -> dict[str, Any]:
    """``{"matched", "changes"}`` (plus ``"error"`` when a rule would fail inspection or
    break) for ``rules`` on copies of ``node`` and its data; ``node`` is only read."""
    sim = InMemoryNode.from_export(node.export())
    data = paths.copied(plugin_data)
    inventory = paths.copied(inventory)
    before = changes.view(sim, paths.copied(data))
    budget = Budget(engine.limits)
    matched, error = False, None
    try:
        for phase in PHASES:
            applied = engine.apply(rules, phase, inventory, data,
                                   None if phase == "early" else sim, budget=budget)
            matched = matched or bool(applied)
    except InspectionFailed as exc:
        matched = True
        error = _message(exc, rules, "would fail inspection")
    except RuleExecutionError as exc:
        error = _message(exc, rules, "failed")
    hide = any(r.sensitive for r in rules)
    row: dict[str, Any] = {"matched": matched,
                           "changes": changes.diff(before, changes.view(sim, data),
                                                   hide_values=hide)}
    if error is not None:
        # Processing would roll everything back: the changes listed would not happen.
        row["error"] = error
    return row


def _message(exc: RuleExecutionError, rules: Sequence[Rule], what: str) -> str:
    if any(r.uuid == exc.rule_uuid and r.sensitive for r in rules):
        return f"sensitive rule {exc.rule_uuid} {what}"
    return f"rule {exc.rule_uuid} {what}: {exc}"
