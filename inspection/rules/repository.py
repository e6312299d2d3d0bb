"""Storage of user rules in ``inspection_rules``, merged with the read-only built-in rules."""

import copy
import uuid as uuidlib
from typing import Any

import jsonpatch
import sqlalchemy as sa
from sqlalchemy.orm import Session

from inspection.common.bounded_patch import PatchTooLarge, apply_bounded
from inspection.db.models import InspectionRule
from inspection.rules.actions import ActionRegistry
from inspection.rules.errors import (
    BuiltInRuleError,
    RuleConflict,
    RuleNotFound,
    RuleValidationError,
)
from inspection.rules.model import PHASES, Rule, sort_rules
from inspection.rules.validation import validate_rule

READ_ONLY = ("built_in", "created_at", "updated_at")
#: Largest rule (bytes of JSON) a patch may make unless the caller says otherwise: what the
#: API's default body limit lets a client create.
MAX_PATCHED_RULE = 4 * 1024 * 1024
#: Fields of a sensitive rule nobody may read back, not even through a patch.
HIDDEN = ("conditions", "actions")
#: Patch operations that read a location (``test`` compares, ``copy``/``move`` lift).
_READING_OPS = ("test", "copy", "move")
_SENSITIVE_PATCH_ERROR = ("patch: the operations cannot be applied to this rule (details are "
                          "not shown: the rule is sensitive)")


def _under_hidden(pointer: object) -> bool:
    """Whether a JSON pointer reaches into (or contains) a hidden field."""
    if not isinstance(pointer, str):
        return False  # not a pointer at all: jsonpatch refuses it
    try:
        parts = jsonpatch.JsonPointer(pointer).parts
    except jsonpatch.JsonPointerException:
        return True  # cannot tell where it points: assume the worst
    return not parts or parts[0] in HIDDEN


def _check_sensitive_patch(operations: Any) -> None:
    """Refuse operations that could reveal a sensitive rule's conditions or actions:
    ``test`` is an oracle, ``copy``/``move`` could lift them into visible fields."""
    if not isinstance(operations, list):
        return
    for op in operations:
        if not isinstance(op, dict) or op.get("op") not in _READING_OPS:
            continue
        if _under_hidden(op.get("path")) or _under_hidden(op.get("from")):
            raise RuleValidationError(
                [f"patch: {op['op']} cannot be used on {' or '.join('/' + h for h in HIDDEN)} "
                 f"of a sensitive rule (they are never readable); replace them instead"],
                "invalid patch")


def _to_rule(row: InspectionRule) -> Rule:
    return Rule(uuid=row.uuid, actions=row.actions or [], conditions=row.conditions or [],
                priority=row.priority, description=row.description, scope=row.scope,
                sensitive=bool(row.sensitive), phase=row.phase or "main", built_in=False,
                created_at=row.created_at, updated_at=row.updated_at, order=row.id)


class RuleRepository:
    """Create, read, update and delete rules; every method works in the caller's session."""

    def __init__(self, built_in_rules: list[Rule] | None = None,
                 default_scope: str | None = None,
                 registry: ActionRegistry | None = None) -> None:
        self.built_in = {r.uuid: r for r in built_in_rules or []}
        self.default_scope = default_scope
        self.registry = registry

    def _row(self, session: Session, rule_uuid: str) -> InspectionRule | None:
        return session.execute(sa.select(InspectionRule)
                               .where(InspectionRule.uuid == rule_uuid)).scalar_one_or_none()

    @staticmethod
    def _canonical(rule_uuid: object) -> str:
        try:
            return str(uuidlib.UUID(str(rule_uuid)))
        except ValueError:
            raise RuleNotFound(str(rule_uuid)[:64]) from None

    def create(self, session: Session, doc: Any) -> Rule:
        """Validate and store a user rule (the ``[inspection_rules]default_scope`` fills a
        missing scope)."""
        rule = validate_rule(doc, registry=self.registry, default_scope=self.default_scope)
        if rule.uuid in self.built_in or self._row(session, rule.uuid) is not None:
            raise RuleConflict(rule.uuid)
        row = InspectionRule(uuid=rule.uuid, priority=rule.priority,
                             description=rule.description, scope=rule.scope,
                             sensitive=rule.sensitive, phase=rule.phase,
                             conditions=copy.deepcopy(rule.conditions),
                             actions=copy.deepcopy(rule.actions))
        session.add(row)
        try:
            session.flush()
        except sa.exc.IntegrityError:
            raise RuleConflict(rule.uuid) from None
        return _to_rule(row)

    def get(self, session: Session, rule_uuid: str) -> Rule:
        """One rule, stored or built in, or :class:`RuleNotFound`."""
        key = self._canonical(rule_uuid)
        if key in self.built_in:
            return self.built_in[key]
        row = self._row(session, key)
        if row is None:
            raise RuleNotFound(key)
        return _to_rule(row)

    def list(self, session: Session, scope: str | None = None,
             phase: str | None = None) -> list[Rule]:
        """Built-in and stored rules in run order, optionally of one scope and/or phase."""
        if phase is not None and phase not in PHASES:
            raise RuleValidationError([f"phase: must be one of: {', '.join(PHASES)}"],
                                      "invalid filter")
        query = sa.select(InspectionRule)
        if scope is not None:
            query = query.where(InspectionRule.scope == scope)
        if phase is not None:
            query = query.where(InspectionRule.phase == phase)
        rules = [_to_rule(row) for row in session.execute(query).scalars()]
        rules += [r for r in self.built_in.values()
                  if (scope is None or r.scope == scope) and (phase is None or r.phase == phase)]
        return sort_rules(rules)

    def update(self, session: Session, rule_uuid: str, changes: dict) -> Rule:
        """Change fields of a user rule; the result is validated as a whole."""
        key = self._canonical(rule_uuid)
        if key in self.built_in:
            raise BuiltInRuleError(key)
        row = self._row(session, key)
        if row is None:
            raise RuleNotFound(key)
        if not isinstance(changes, dict):
            raise RuleValidationError(["rule: changes must be an object"])
        current = _to_rule(row)
        problems = []
        if changes.get("built_in") not in (None, False):
            problems.append("built_in: cannot be changed")
        if "uuid" in changes and str(changes["uuid"]).lower() != key:
            problems.append("uuid: cannot be changed")
        if current.sensitive and changes.get("sensitive", True) is not True:
            problems.append("sensitive: a sensitive rule cannot be made non-sensitive")
        if problems:
            raise RuleValidationError(problems)
        doc = current.document()
        doc.update({k: v for k, v in changes.items() if k not in READ_ONLY})
        doc["uuid"] = key
        if doc.get("actions") is None:
            doc.pop("actions", None)  # reported as "actions: required"
        rule = validate_rule(doc, registry=self.registry)
        row.priority, row.description, row.scope = rule.priority, rule.description, rule.scope
        row.sensitive, row.phase = rule.sensitive, rule.phase
        row.conditions = copy.deepcopy(rule.conditions)
        row.actions = copy.deepcopy(rule.actions)
        session.flush()
        return _to_rule(row)

    def patch(self, session: Session, rule_uuid: str, operations: Any,
              max_size: int = MAX_PATCHED_RULE) -> Rule:
        """Apply an RFC 6902 JSON patch to a user rule (``remove /sensitive`` cannot make a
        sensitive rule non-sensitive; removing a field resets it to its default); a result
        over ``max_size`` bytes of JSON is refused before it is built.

        On a sensitive rule, ``test``/``copy``/``move`` touching its conditions or actions are
        refused and errors never quote the rule's content.
        """
        current = self.get(session, rule_uuid)
        if current.built_in:
            raise BuiltInRuleError(current.uuid)
        if current.sensitive:
            _check_sensitive_patch(operations)
        before = {**current.document(), "built_in": False}
        try:
            after = apply_bounded(before, operations, max_size, "rule")
        except PatchTooLarge as exc:
            raise RuleValidationError([f"patch: {exc}"], "invalid patch") from None
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException,
                TypeError, ValueError, AttributeError, KeyError) as exc:
            # jsonpatch's messages quote values and whole sub-documents.
            problem = _SENSITIVE_PATCH_ERROR if current.sensitive else f"patch: {exc}"
            raise RuleValidationError([problem], "invalid patch") from None
        if not isinstance(after, dict):
            raise RuleValidationError(["patch: the result must be an object"], "invalid patch")
        defaults = {"uuid": current.uuid, "priority": 0, "description": None, "scope": None,
                    "phase": "main", "conditions": [], "sensitive": False, "actions": None}
        changes = {k: after.get(k, default) for k, default in defaults.items()}
        unknown = sorted(set(after) - set(defaults) - set(READ_ONLY))
        if unknown:
            raise RuleValidationError([f"{k}: unknown field" for k in unknown])
        if after.get("built_in", False) is not False:
            changes["built_in"] = after["built_in"]
        return self.update(session, current.uuid, changes)

    def delete(self, session: Session, rule_uuid: str) -> None:
        """Delete a user rule; built-in rules raise :class:`BuiltInRuleError`."""
        key = self._canonical(rule_uuid)
        if key in self.built_in:
            raise BuiltInRuleError(key, "deleted")
        row = self._row(session, key)
        if row is None:
            raise RuleNotFound(key)
        session.delete(row)
        session.flush()

    def delete_all(self, session: Session) -> int:
        """Delete every user rule (built-in rules stay); return how many were deleted."""
        result = session.execute(sa.delete(InspectionRule))
        session.flush()
        return result.rowcount or 0
