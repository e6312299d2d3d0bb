"""Validation of rule documents: jsonschema for structure, then compilation for meaning.

Every problem is reported at once as ``path: message``; messages never quote values of a
sensitive rule. :func:`check_rule` never raises for any input.
"""

import logging
import re
import uuid as uuidlib
from typing import Any

import jsonschema

from inspection.rules.actions import ActionRegistry, default_registry
from inspection.rules.compiler import MULTIPLE, CompiledRule, compile_op
from inspection.rules.errors import RuleValidationError
from inspection.rules.model import PHASES, USER_PRIORITY_MAX, USER_PRIORITY_MIN, Rule

LOG = logging.getLogger(__name__)

_OP_PROPS = {"op": {"type": "string", "minLength": 1},
             "args": {"type": ["array", "object"]},
             "loop": {"type": ["array", "object", "string"]}}
CONDITION_SCHEMA = {"type": "object", "required": ["op"], "additionalProperties": False,
                    "properties": {**_OP_PROPS, "multiple": {"enum": list(MULTIPLE)}}}
ACTION_SCHEMA = {"type": "object", "required": ["op"], "additionalProperties": False,
                 "properties": _OP_PROPS}
RULE_SCHEMA = {
    "type": "object",
    "required": ["actions"],
    "additionalProperties": False,
    "properties": {
        "uuid": {"type": "string"},
        "description": {"type": ["string", "null"], "maxLength": 255},
        "scope": {"type": ["string", "null"], "minLength": 1, "maxLength": 255},
        "priority": {"type": "integer"},
        "sensitive": {"type": "boolean"},
        "phase": {"enum": list(PHASES)},
        "conditions": {"type": ["array", "null"], "items": CONDITION_SCHEMA},
        "actions": {"type": "array", "minItems": 1, "items": ACTION_SCHEMA},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(RULE_SCHEMA)
_TYPE_NAMES = {"object": "an object", "array": "a list", "string": "a string",
               "integer": "an integer", "boolean": "true or false", "null": "null"}


def _path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "rule"


def _join(base: str, name: object) -> str:
    return f"{base}.{name}" if base != "rule" else str(name)


def _schema_problems(doc: Any) -> list[tuple[str, str]]:
    problems = []
    for error in _VALIDATOR.iter_errors(doc):
        where = _path(error.absolute_path)
        kind, expected, instance = error.validator, error.validator_value, error.instance
        if kind == "required":
            problems += [(_join(where, p), "required") for p in expected if p not in instance]
        elif kind == "additionalProperties":
            allowed = set(error.schema.get("properties", {}))
            for key in instance:
                if key not in allowed:
                    msg = ("cannot be set: built-in rules come from the configuration file"
                           if key == "built_in" else
                           f"unknown field (allowed: {', '.join(sorted(allowed))})")
                    problems.append((_join(where, key), msg))
        elif kind == "type":
            types = expected if isinstance(expected, list) else [expected]
            problems.append((where, "must be " + " or ".join(_TYPE_NAMES.get(t, t)
                                                             for t in types)))
        elif kind == "enum":
            problems.append((where, f"must be one of: {', '.join(map(str, expected))}"))
        elif kind == "maxLength":
            problems.append((where, f"must be at most {expected} characters"))
        elif kind == "minLength":
            problems.append((where, "must not be empty"))
        elif kind == "minItems":
            problems.append((where, f"needs at least {expected} item(s)"))
        else:
            problems.append((where, f"fails the {kind} check"))
    return problems


def _redact(message: str) -> str:
    message = re.sub(r"'[^']*'", "'...'", message)
    return re.sub(r"\{[^}]*\}", "{...}", message)


def _check(doc: Any, built_in: bool,
           registry: ActionRegistry) -> tuple[list[str], CompiledRule | None]:
    problems = _schema_problems(doc)
    if not isinstance(doc, dict):
        return [f"{p}: {m}" for p, m in problems], None
    sensitive = doc.get("sensitive") is True
    priority = doc.get("priority", 0)
    if (not built_in and isinstance(priority, int) and not isinstance(priority, bool)
            and not USER_PRIORITY_MIN <= priority <= USER_PRIORITY_MAX):
        problems.append(("priority", f"must be between {USER_PRIORITY_MIN} and "
                                     f"{USER_PRIORITY_MAX} (other values are reserved for "
                                     f"built-in rules)"))
    rule_uuid = doc.get("uuid")
    if isinstance(rule_uuid, str):
        try:
            uuidlib.UUID(rule_uuid)
        except ValueError:
            problems.append(("uuid", "must be a UUID"))
    phase = doc.get("phase") or "main"
    if phase == "early" and isinstance(doc.get("scope"), str):
        problems.append(("scope", "cannot be used in the early phase (there is no node to "
                                  "match it against yet)"))
    compiled: dict[str, list] = {"conditions": [], "actions": []}
    for kind in ("conditions", "actions"):
        ops = doc.get(kind)
        if not isinstance(ops, list):
            continue
        for index, op_doc in enumerate(ops):
            if isinstance(op_doc, dict):
                if kind == "actions" and "multiple" in op_doc:
                    continue  # reported by the schema as an unknown field
                compiled[kind].append(compile_op(op_doc, index, kind, phase, registry=registry,
                                                 problems=problems, sensitive=sensitive))
    messages = [f"{p}: {_redact(m) if sensitive else m}" for p, m in problems]
    if messages:
        return messages, None
    return [], CompiledRule(compiled["conditions"], compiled["actions"])


def check_rule(doc: Any, *, built_in: bool = False,
               registry: ActionRegistry | None = None) -> list[str]:
    """Every problem of a rule document as ``path: message``; empty when valid."""
    try:
        return _check(doc, built_in, registry or default_registry())[0]
    except Exception:  # a last line of defence: validation must never crash the caller
        LOG.exception("unexpected error validating an inspection rule")
        return ["rule: cannot be validated (unexpected structure)"]


def validate_rule(doc: Any, *, built_in: bool = False, registry: ActionRegistry | None = None,
                  default_scope: str | None = None) -> Rule:
    """A :class:`Rule` from a document, or :class:`RuleValidationError` listing every problem.

    A missing uuid is generated; ``default_scope`` fills a missing scope (not for built-in or
    early-phase rules).
    """
    try:
        problems, compiled = _check(doc, built_in, registry or default_registry())
    except Exception:
        LOG.exception("unexpected error validating an inspection rule")
        problems, compiled = ["rule: cannot be validated (unexpected structure)"], None
    if problems or compiled is None:
        raise RuleValidationError(problems or ["rule: invalid"])
    phase = doc.get("phase") or "main"
    scope = doc.get("scope")
    if scope is None and default_scope and not built_in and phase != "early":
        scope = default_scope
    rule = Rule(uuid=str(uuidlib.UUID(doc["uuid"])) if doc.get("uuid") else str(uuidlib.uuid4()),
                actions=doc["actions"], conditions=doc.get("conditions") or [],
                priority=doc.get("priority", 0), description=doc.get("description"),
                scope=scope, sensitive=doc.get("sensitive", False), phase=phase,
                built_in=built_in)
    rule.compiled = compiled
    return rule
