"""Evaluate rules against inventory, plugin data and (after lookup) a node.

The engine knows nothing of the database: the node is a :class:`NodeAdapter`. It changes the
node and ``plugin_data`` in place and raises :class:`RuleExecutionError` when an action fails;
the caller commits or rolls back. :meth:`RulesEngine.explain` runs on copies and reports.
"""

import logging
import re
from collections.abc import Iterable
from typing import Any

import sqlalchemy.exc

from inspection import metrics
from inspection.rules import paths, template, values
from inspection.rules.actions import ActionContext, ActionRegistry, default_registry
from inspection.rules.adapters import InMemoryNode, NodeAdapter
from inspection.rules.compiler import CompiledOp, CompiledRule
from inspection.rules.errors import (
    ActionError,
    InspectionFailed,
    RuleExecutionError,
    RuleValidationError,
    TemplateError,
)
from inspection.rules.limits import Budget, Limits, RuleLimitExceeded
from inspection.rules.masking import MASK, is_secret_key, masked, should_mask
from inspection.rules.model import PHASES, Rule, sort_rules
from inspection.rules.validation import _check

LOG = logging.getLogger("inspection.rules")
# explain records what the log action would write instead of writing it
_EXPLAIN_LOG = logging.getLogger("inspection.rules.explain")
_EXPLAIN_LOG.addHandler(logging.NullHandler())
_EXPLAIN_LOG.propagate = False


def interface_supported(inspect_interface: str | None, supported: Iterable[str]) -> bool:
    """Whether rules run for a node with this inspect interface.

    Each entry of ``[inspection_rules]supported_interfaces`` is a name or a regular expression
    matched against the whole interface name (``.*`` runs rules for every interface).
    """
    name = inspect_interface or ""
    for entry in supported:
        try:
            if re.fullmatch(entry, name):
                return True
        except re.error:
            if entry == name:
                return True
    return False


def node_scope(node: NodeAdapter | None) -> str | None:
    """The node's ``properties['inspection_scope']``."""
    if node is None:
        return None
    props = node.read_field("properties") or {}
    return props.get("inspection_scope") if isinstance(props, dict) else None


def _make_scope(inventory: dict, plugin_data: dict, node: NodeAdapter | None,
                mask: bool) -> template.Scope:
    if node is None:
        return template.Scope(inventory, plugin_data, mask=mask)
    return template.Scope(inventory, plugin_data, template.NodeRoot(node.read_field,
                                                                    node.snapshot),
                          ports=node.ports, port_groups=node.port_groups, mask=mask)


def _display_args(cop: CompiledOp, scope: template.Scope) -> dict[str, Any]:
    """Arguments as a person may see them: interpolated with secrets masked, and a value
    written to a secret-named path masked too."""
    shown = {}
    for name, value in cop.args.items():
        try:
            shown[name] = masked(values.evaluate(value, scope, lenient=True))
        except TemplateError as exc:
            shown[name] = f"<{exc}>"
    target = shown.get("path")
    if isinstance(target, str) and "value" in shown:
        last = re.split(r"[/.]", target.strip("/"))[-1]
        if is_secret_key(last):
            shown["value"] = MASK
    return shown


class RulesEngine:
    """Runs rules; ``mask_secrets`` is ``[inspection_rules]mask_secrets``."""

    #: Whether runs count in the rules metrics (dry runs do not).
    counted = True

    def __init__(self, mask_secrets: str = "always", registry: ActionRegistry | None = None,
                 logger: logging.Logger | None = None, limits: Limits | None = None) -> None:
        self.mask_secrets = mask_secrets
        self.limits = limits or Limits()
        self.registry = registry or default_registry()
        self.log = logger or LOG

    def compiled(self, rule: Rule) -> CompiledRule:
        """The compiled form of a rule (cached on it)."""
        if rule.compiled is None:
            problems, compiled = _check(rule.document(), rule.built_in, self.registry)
            if compiled is None:
                raise RuleValidationError(problems, f"stored inspection rule {rule.uuid} is "
                                                    f"no longer valid")
            rule.compiled = compiled
        return rule.compiled

    def select(self, rules: Iterable[Rule], phase: str, node: NodeAdapter | None) -> list[Rule]:
        """The rules of ``phase`` whose scope matches the node, in run order."""
        scope = node_scope(node)
        return sort_rules([r for r in rules if r.phase == phase
                           and (r.scope is None or r.scope == scope)])

    def apply(self, rules: Iterable[Rule], phase: str, inventory: dict, plugin_data: dict,
              node: NodeAdapter | None = None, *, budget: Budget | None = None) -> list[str]:
        """Run the matching rules of ``phase``; return the UUIDs of rules whose actions ran.

        ``budget`` is shared by the phases of one callback (a new one when not given).
        Raises :class:`InspectionFailed` (the ``fail`` action) or :class:`RuleExecutionError`
        (:class:`RuleLimitExceeded` past the limits).
        """
        budget = budget or Budget(self.limits)
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}")
        if phase != "early" and node is None:
            raise ValueError(f"the {phase} phase needs a node")
        node = None if phase == "early" else node
        node_uuid = node.uuid if node is not None else None
        applied: list[str] = []
        evaluated = matched = 0
        # Scopes hold no per-rule state: one per masking mode serves every rule.
        scopes: dict[bool, tuple[template.Scope, template.Scope]] = {}
        try:
            for rule in self.select(rules, phase, node):
                evaluated += 1
                budget.check_time(rule.uuid)
                try:
                    compiled = self.compiled(rule)
                except RuleValidationError as exc:
                    raise RuleExecutionError(str(exc) if not rule.sensitive else
                                             f"stored inspection rule {rule.uuid} is no longer "
                                             f"valid", rule.uuid) from None
                mask = should_mask(self.mask_secrets, rule.sensitive)
                if mask not in scopes:
                    scope = _make_scope(inventory, plugin_data, node, mask)
                    scopes[mask] = (scope, scope if mask else scope.masking(True))
                scope, display = scopes[mask]
                for cond in compiled.conditions:
                    if not self._condition(rule, cond, scope, display, None, budget=budget):
                        break
                else:
                    self.log.info("inspection rule %s matched on node %s (phase %s)",
                                  rule.uuid, node_uuid, phase)
                    matched += 1
                    ctx = ActionContext(node, inventory, plugin_data, rule.uuid,
                                        rule.sensitive, self.log)
                    for action in compiled.actions:
                        self._action(rule, action, scope, display=display, ctx=ctx,
                                     trace=None, budget=budget)
                    applied.append(rule.uuid)
        finally:
            # counted once per call: labels() and inc() per rule cost more than some rules
            if evaluated and self.counted:
                metrics.RULES_EVALUATED.labels(phase=phase).inc(evaluated)
            if matched and self.counted:
                metrics.RULES_MATCHED.labels(phase=phase).inc(matched)
        return applied

    def _condition(self, rule: Rule, cop: CompiledOp, scope: template.Scope,
                   display: template.Scope, trace: list | None, *,
                   budget: Budget | None = None) -> bool:
        entry: dict[str, Any] = {"op": cop.op}
        try:
            if cop.loop is None:
                if trace is not None:
                    entry["args"] = _display_args(cop, display)
                args, kwargs = cop.call_args(scope, lenient=True)
                result = cop.func(*args, **kwargs)
            else:
                items = self._items(cop, scope, lenient=True)
                if budget is not None:
                    budget.check_loop(len(items), rule.uuid)
                if cop.multiple == "first":
                    items = items[:1]
                elif cop.multiple == "last":
                    items = items[-1:]
                results = []
                iterations = entry["iterations"] = []
                for item in items:
                    if budget is not None:
                        budget.check_time(rule.uuid)
                    one = self._call(cop, scope.with_item(item))
                    results.append(one)
                    if trace is not None:
                        iterations.append({"item": masked(item), "result": one,
                                           "args": _display_args(cop, display.with_item(item))})
                    elif (cop.multiple == "any" and one) or (cop.multiple == "all" and not one):
                        break
                if cop.multiple == "all":
                    result = all(results)
                elif cop.multiple == "any":
                    result = any(results)
                else:
                    result = bool(results) and results[0]
            result = (not result) if cop.negated else bool(result)
        except RuleLimitExceeded:
            raise  # a limit fails the inspection, it does not just skip the rule
        except sqlalchemy.exc.SQLAlchemyError:
            raise  # the database's trouble, not the data's: the caller decides
        except Exception as exc:  # data the condition cannot judge: the rule does not match
            result = False
            entry["error"] = str(exc)
            if trace is not None:
                pass
            elif rule.sensitive:
                self.log.warning("inspection rule %s: condition %d cannot be evaluated",
                                 rule.uuid, cop.index)
            else:
                self.log.warning("inspection rule %s: condition %d (%s) cannot be "
                                 "evaluated: %s", rule.uuid, cop.index, cop.op, exc)
        entry["result"] = result
        if trace is not None:
            trace.append(entry)
        return result

    @staticmethod
    def _call(cop: CompiledOp, scope: template.Scope) -> bool:
        args, kwargs = cop.call_args(scope, lenient=True)
        return bool(cop.func(*args, **kwargs))

    @staticmethod
    def _items(cop: CompiledOp, scope: template.Scope, lenient: bool) -> list:
        items = values.evaluate(cop.loop, scope, lenient)
        if isinstance(items, dict):
            return [items]
        if isinstance(items, (list, tuple)):
            return list(items)
        if items is None and lenient:
            return []
        raise ActionError(f"loop must evaluate to a list, got {type(items).__name__}")

    def _action(self, rule: Rule, cop: CompiledOp, scope: template.Scope, *,
                display: template.Scope, ctx: ActionContext, trace: list | None,
                budget: Budget | None = None) -> None:
        scope = scope.refusing_masked()  # an action never copies a masked secret
        try:
            items = [None] if cop.loop is None else self._items(cop, scope, lenient=False)
            if budget is not None:
                budget.check_loop(len(items), rule.uuid)
            for item in items:
                run_scope, shown = scope, display
                if cop.loop is not None:
                    run_scope, shown = scope.with_item(item), display.with_item(item)
                args, kwargs = cop.call_args(run_scope, lenient=False, display=shown)
                if budget is not None:
                    budget.check_time(rule.uuid)
                    budget.check_write([args, kwargs], rule.uuid)
                if trace is not None:
                    trace.append({"op": cop.op, "args": _display_args(cop, shown)})
                cop.func(ctx, *args, **kwargs)
        except RuleLimitExceeded as exc:
            if trace is None:
                self.log.error("%s", exc)
            raise
        except InspectionFailed as exc:
            if trace is None:
                # A sensitive rule's message may quote secrets: the UUID only.
                self.log.error("inspection rule %s failed inspection of node %s%s",
                               rule.uuid, ctx.node.uuid if ctx.node else None,
                               "" if rule.sensitive else f": {exc}")
            raise InspectionFailed(str(exc), rule.uuid, cop.index) from None
        except sqlalchemy.exc.SQLAlchemyError:
            raise  # the database's trouble, not the data's: the caller decides
        except Exception as exc:
            if rule.sensitive:
                message = f"inspection rule {rule.uuid}: action {cop.index} failed"
            else:
                message = (f"inspection rule {rule.uuid}: action {cop.index} ({cop.name}) "
                           f"failed: {exc}")
            if trace is None:
                self.log.error("%s", message)
            raise RuleExecutionError(message, rule.uuid, cop.index) from None

    def explain(self, rules: Iterable[Rule], inventory: dict, plugin_data: dict,
                node: NodeAdapter | None = None, phase: str | None = None) -> list[dict]:
        """What the rules would do, without changing anything.

        Runs every phase in order (or only ``phase``) on copies of the node and plugin data so
        that later rules see earlier rules' effects. Sensitive rules report only whether they
        would run.
        """
        sim_node = InMemoryNode.from_export(node.export()) if node is not None \
            else InMemoryNode({"uuid": None})
        sim_data = paths.copied(plugin_data)
        sim_inventory = paths.copied(inventory)
        ordered = sort_rules(list(rules))
        reports: dict[int, dict] = {}
        stopped: str | None = None
        for ph in PHASES:
            for rule in ordered:
                if rule.phase != ph:
                    continue
                report = self._explain_rule(rule, ph == phase or phase is None,
                                            inventory=sim_inventory, plugin_data=sim_data,
                                            sim_node=sim_node, stopped=stopped)
                reports[id(rule)] = report
                if report["outcome"] in ("would fail inspection", "action error"):
                    stopped = report["outcome"]
        return [reports[id(r)] for ph in PHASES for r in ordered if r.phase == ph]

    def _explain_rule(self, rule: Rule, phase_matches: bool, *, inventory: dict,
                      plugin_data: dict, sim_node: InMemoryNode, stopped: str | None) -> dict:
        node = None if rule.phase == "early" else sim_node
        scope_matches = rule.scope is None or rule.scope == node_scope(node)
        report: dict[str, Any] = {
            "uuid": rule.uuid, "description": rule.description, "priority": rule.priority,
            "phase": rule.phase, "scope": rule.scope, "built_in": rule.built_in,
            "sensitive": rule.sensitive, "phase_matches": phase_matches,
            "scope_matches": scope_matches, "conditions_match": None, "would_run": False,
            "outcome": "skipped", "message": None, "conditions": [], "actions": []}
        if stopped:
            report["outcome"] = "not reached"
            report["message"] = f"an earlier rule: {stopped}"
        elif phase_matches and scope_matches:
            self._explain_run(rule, report, inventory, plugin_data, node)
        if rule.sensitive:
            report["conditions"] = report["actions"] = None
            if report["outcome"] == "action error":
                report["message"] = "an action failed (details hidden: the rule is sensitive)"
        return report

    def _explain_run(self, rule: Rule, report: dict, inventory: dict, plugin_data: dict,
                     node: NodeAdapter | None) -> None:
        try:
            compiled = self.compiled(rule)
        except RuleValidationError as exc:
            report["outcome"], report["message"] = "action error", str(exc)
            return
        mask = should_mask(self.mask_secrets, rule.sensitive)
        scope = _make_scope(inventory, plugin_data, node, mask)
        display = scope if mask else scope.masking(True)
        matched = True
        for cop in compiled.conditions:
            matched = self._condition(rule, cop, scope, display, report["conditions"]) \
                and matched
        report["conditions_match"] = matched
        if not matched:
            return
        report["would_run"] = True
        report["outcome"] = "applied"
        ctx = ActionContext(node, inventory, plugin_data, rule.uuid, rule.sensitive,
                            _EXPLAIN_LOG)
        for cop in compiled.actions:
            try:
                self._action(rule, cop, scope, display=display, ctx=ctx,
                             trace=report["actions"])
            except InspectionFailed as exc:
                report["outcome"], report["message"] = "would fail inspection", str(exc)
                return
            except RuleExecutionError as exc:
                report["outcome"], report["message"] = "action error", str(exc)
                return
