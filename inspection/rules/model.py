"""The in-memory form of an inspection rule and its public representation."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PHASES = ("early", "preprocess", "main")
USER_PRIORITY_MIN, USER_PRIORITY_MAX = 0, 9999
FIELDS = ("uuid", "priority", "description", "scope", "sensitive", "phase", "conditions",
          "actions")


@dataclass(eq=False)
class Rule:
    """One validated rule; ``order`` breaks priority ties (creation order)."""

    uuid: str
    actions: list
    conditions: list = field(default_factory=list)
    priority: int = 0
    description: str | None = None
    scope: str | None = None
    sensitive: bool = False
    phase: str = "main"
    built_in: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None
    order: int = 0
    compiled: Any = field(default=None, repr=False)

    def __repr__(self) -> str:
        # Never show conditions/actions: a sensitive rule's arguments may hold credentials.
        return (f"Rule(uuid={self.uuid!r}, priority={self.priority}, phase={self.phase!r}, "
                f"scope={self.scope!r}, built_in={self.built_in})")

    def sort_key(self) -> tuple:
        """Run order: priority high to low, then built-ins (file order), then creation order."""
        created = self.created_at.timestamp() if self.created_at else 0.0
        return (-self.priority, 0 if self.built_in else 1, created, self.order)

    def document(self) -> dict:
        """The editable fields as a plain document (for PATCH and re-validation)."""
        return {"uuid": self.uuid, "priority": self.priority, "description": self.description,
                "scope": self.scope, "sensitive": self.sensitive, "phase": self.phase,
                "conditions": self.conditions, "actions": self.actions}

    def to_dict(self, detail: bool = True) -> dict:
        """The API representation: conditions/actions are null for sensitive rules and absent
        without ``detail``."""
        data: dict[str, Any] = {
            "uuid": self.uuid, "priority": self.priority, "description": self.description,
            "scope": self.scope, "sensitive": self.sensitive, "phase": self.phase,
            "built_in": self.built_in,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }
        if detail:
            data["conditions"] = None if self.sensitive else self.conditions
            data["actions"] = None if self.sensitive else self.actions
        return data


def sort_rules(rules: list[Rule]) -> list[Rule]:
    """Rules in run order."""
    return sorted(rules, key=Rule.sort_key)
