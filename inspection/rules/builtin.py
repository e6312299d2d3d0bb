"""Built-in rules: a YAML list loaded and validated once at start-up."""

import uuid as uuidlib

import yaml

from inspection.rules.actions import ActionRegistry
from inspection.rules.errors import BuiltInRulesFileError, RuleValidationError
from inspection.rules.model import Rule
from inspection.rules.validation import validate_rule

# Stable UUIDs for built-in rules written without one: from the position and description.
_NAMESPACE = uuidlib.UUID("6c1f0d1e-2b7a-4d53-9f0e-3a1b2c4d5e6f")


def load_built_in_rules(path: str | None,
                        registry: ActionRegistry | None = None) -> list[Rule]:
    """The rules of ``[inspection_rules]built_in_rules``; every problem of the file is
    reported at once in :class:`BuiltInRulesFileError`."""
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as stream:
            data = yaml.safe_load(stream)
    except OSError as exc:
        raise BuiltInRulesFileError(path, [f"cannot read: {exc.strerror or exc}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise BuiltInRulesFileError(path, [f"{where}invalid YAML: {problem}"]) from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise BuiltInRulesFileError(path, ["the file must hold a list of rules"])
    rules: list[Rule] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(data):
        doc = raw
        if isinstance(raw, dict) and "uuid" not in raw:
            doc = {**raw, "uuid": str(uuidlib.uuid5(
                _NAMESPACE, f"{index}:{raw.get('description')}"))}
        try:
            rule = validate_rule(doc, built_in=True, registry=registry)
        except RuleValidationError as exc:
            problems += [f"rule {index}: {p}" for p in exc.problems]
            continue
        if rule.uuid in seen:
            problems.append(f"rule {index}: uuid: same as rule {seen[rule.uuid]}")
            continue
        seen[rule.uuid] = index
        rule.order = index
        rules.append(rule)
    if problems:
        raise BuiltInRulesFileError(path, problems)
    return rules
