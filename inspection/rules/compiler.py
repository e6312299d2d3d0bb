"""Turn validated rule documents into executable operations, collecting every problem.

Validation *is* compilation: an op is looked up, its arguments are bound to its signature,
literal arguments are checked and templates are parsed once, each problem recorded with the
path of the offending item (``actions[2].args.path``).
"""

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inspection.rules import template, values
from inspection.rules.actions import ActionRegistry, parameters
from inspection.rules.conditions import CONDITIONS

MULTIPLE = ("any", "all", "first", "last")
_OP = re.compile(r"\s*(!?)\s*([A-Za-z0-9_.-]+)\s*")
_MISSING = object()


@dataclass(slots=True)
class CompiledOp:
    """One condition or action ready to run."""

    index: int
    op: str
    name: str
    negated: bool
    func: Callable
    args: dict[str, values.Compiled]
    positional: tuple[str, ...]
    var_name: str | None
    masked: frozenset
    loop: values.Compiled | None
    multiple: str

    def call_args(self, scope: template.Scope, lenient: bool,
                  display: template.Scope | None = None) -> tuple[list, dict]:
        """Evaluated (args, kwargs) for the call; ``masked`` arguments use ``display``."""
        evaluate = values.evaluate
        if display is None or not self.masked:
            evaluated = {name: evaluate(value, scope, lenient)
                         for name, value in self.args.items()}
        else:
            evaluated = {name: evaluate(value, display if name in self.masked else scope,
                                        lenient) for name, value in self.args.items()}
        if not self.positional and self.var_name is None:
            return [], evaluated
        args = [evaluated.pop(n) for n in self.positional if n in evaluated]
        if self.var_name is not None and self.var_name in evaluated:
            spread = evaluated.pop(self.var_name)
            if not isinstance(spread, list):
                raise TypeError(f"{self.var_name} must be a list")
            args.extend(spread)
        return args, evaluated


@dataclass(slots=True)
class CompiledRule:
    """A rule's conditions and actions compiled."""

    conditions: list[CompiledOp]
    actions: list[CompiledOp]


def parse_op(op: str) -> tuple[str, bool] | None:
    """(name, negated) from ``eq``, ``!eq`` or ``! eq``; None if malformed."""
    match = _OP.fullmatch(op)
    if not match:
        return None
    return match.group(2), bool(match.group(1))


def _bind(params: list[inspect.Parameter], args: Any, where: str,
          problems: list[tuple[str, str]]) -> tuple[dict[str, Any], tuple[str, ...], str | None]:
    by_name = {p.name: p for p in params}
    var = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    has_kwargs = any(p.kind is p.VAR_KEYWORD for p in params)
    positional_params = [p for p in params
                         if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    bound: dict[str, Any] = {}
    if isinstance(args, list):
        for i, value in enumerate(args):
            if i < len(positional_params):
                bound[positional_params[i].name] = value
            elif var is not None:
                bound.setdefault(var, []).append(value)
            else:
                problems.append((f"{where}[{i}]", f"too many arguments (at most "
                                                  f"{len(positional_params)})"))
                break
    elif isinstance(args, dict):
        for key, value in args.items():
            param = by_name.get(key)
            if param is None or param.kind is param.VAR_KEYWORD:
                if has_kwargs and isinstance(key, str) and not key.startswith("_"):
                    bound[key] = value
                    continue
                expected = ", ".join(p.name for p in params
                                     if p.kind is not p.VAR_KEYWORD) or "none"
                problems.append((f"{where}.{key}", f"unknown argument (expected: {expected})"))
            else:
                bound[key] = value
    for p in params:
        if (p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and p.default is p.empty and p.name not in bound):
            problems.append((f"{where}.{p.name}", "required"))
    # Leading positional parameters go positionally when *args follows (or they are
    # positional-only); the rest by keyword.
    if var is not None:
        positional = tuple(p.name for p in positional_params)
        for p in positional_params:
            if p.name not in bound and p.default is not p.empty:
                bound[p.name] = p.default
    else:
        positional = tuple(p.name for p in positional_params if p.kind is p.POSITIONAL_ONLY)
    return bound, positional, var


def compile_op(doc: dict, index: int, kind: str, phase: str, *, registry: ActionRegistry,
               problems: list[tuple[str, str]], sensitive: bool) -> CompiledOp | None:
    """Compile one condition (``kind='conditions'``) or action; None when it has problems."""
    where = f"{kind}[{index}]"
    start = len(problems)
    op = doc.get("op")
    if not isinstance(op, str):
        return None  # reported by the schema
    parsed = parse_op(op)
    if parsed is None:
        problems.append((f"{where}.op", "malformed op: a name, optionally preceded by '!'"))
        return None
    name, negated = parsed
    shown = "" if sensitive else f" {name!r}"
    is_condition = kind == "conditions"
    if is_condition:
        func = CONDITIONS.get(name)
        known = ", ".join(CONDITIONS)
    else:
        func = registry.get(name)
        known = ", ".join(sorted(registry.actions))
        if negated:
            problems.append((f"{where}.op", "'!' (negation) only applies to conditions"))
    if func is None:
        detail = registry.load_failures.get(name) if not is_condition else None
        reason = f" (its plugin failed to load: {detail})" if detail else ""
        problems.append((f"{where}.op", f"unknown {kind[:-1]}{shown}{reason}; known: {known}"))
        return None
    if not is_condition and phase == "early" and not registry.supports_early(name):
        problems.append((f"{where}.op", f"action{shown} needs a node and cannot run in the "
                                        f"early phase"))
    try:
        params = parameters(func, skip_context=not is_condition)
    except (TypeError, ValueError):
        problems.append((f"{where}.op", f"action{shown} has no usable signature"))
        return None
    args = doc.get("args", [])
    if not isinstance(args, (list, dict)):
        return None  # reported by the schema
    bound, positional, var = _bind(params, args, f"{where}.args", problems)

    literal = set(getattr(func, "literal", ()))
    checks = getattr(func, "checks", {})
    has_loop = doc.get("loop") is not None
    fields: list[tuple[str, template.Field]] = []
    compiled: dict[str, values.Compiled] = {}
    for arg_name, value in bound.items():
        arg_where = f"{where}.args.{arg_name}"
        if arg_name in literal:
            compiled[arg_name] = values.Const(value)
        else:
            compiled[arg_name] = values.compile_value(value, arg_where, problems, fields)
        check = checks.get(arg_name)
        if check is not None and isinstance(compiled[arg_name], values.Const):
            error = check(value)
            if error:
                problems.append((arg_where, error))
    if var is not None and isinstance(args, list) and is_condition \
            and len(bound.get(var, [])) < 2:
        problems.append((f"{where}.args", "needs at least two values to compare"))
    if var is not None and isinstance(args, dict) and var in bound:
        spread = compiled[var]
        if isinstance(spread, values.Const) and not isinstance(spread.value, list):
            problems.append((f"{where}.args.{var}", "must be a list"))
        elif isinstance(spread, values.Tmpl) and spread.template.whole is None:
            problems.append((f"{where}.args.{var}", "must be a list or one {...} template"))

    loop = None
    if has_loop:
        before = len(problems)
        loop = values.compile_value(doc["loop"], f"{where}.loop", problems, fields)
        bad_template = isinstance(loop, values.Tmpl) and loop.template.whole is None
        literal_text = isinstance(loop, values.Const) and isinstance(loop.value, str)
        if len(problems) == before and (bad_template or literal_text):
            problems.append((f"{where}.loop", "must be a list or exactly one {...} template"))
    for field_where, field in fields:
        if field.root in template.NODE_ROOTS and phase == "early":
            problems.append((field_where, f"{{{field.root}}} is not available in the early "
                                          f"phase (there is no node yet)"))
        if field.root == "item" and not has_loop:
            problems.append((field_where, "{item} is only available with 'loop'"))
    multiple = doc.get("multiple", "any")
    if len(problems) > start:
        return None
    return CompiledOp(index=index, op=op, name=name, negated=negated, func=func,
                      args=compiled, positional=positional, var_name=var,
                      masked=frozenset(getattr(func, "masked_args", ())), loop=loop,
                      multiple=multiple if multiple in MULTIPLE else "any")
