"""Bounds on what rules may do with data an untrusted ramdisk sent.

A rule can loop over any list of the inventory and write what it reads: without bounds a 4 MB
callback and one looping ``extend-attribute`` make a 100 MB node, and an early-phase loop over
a million items holds an API thread for seconds on an unauthenticated request.
"""

import json
import time
from dataclasses import dataclass, field
from typing import Any

from inspection.rules.errors import RuleExecutionError


class RuleLimitExceeded(RuleExecutionError):
    """A rule went past one of the :class:`Limits`; inspection fails with this message."""


@dataclass(frozen=True)
class Limits:
    """``[inspection_rules]`` max_loop_items, max_value_size, max_node_size, max_seconds."""

    max_loop_items: int = 10000
    max_value_size: int = 64 * 1024
    max_node_size: int = 1024 * 1024
    max_seconds: float = 5.0

    @classmethod
    def from_conf(cls, conf) -> "Limits":
        """The limits configured in ``[inspection_rules]``."""
        opts = conf.inspection_rules
        return cls(opts.max_loop_items, opts.max_value_size, opts.max_node_size,
                   opts.max_seconds)


@dataclass
class Budget:
    """What the rules of one callback have used so far: time and bytes written."""

    limits: Limits
    deadline: float = 0.0
    written: int = 0
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if not self.deadline:
            self.deadline = self.started + self.limits.max_seconds

    def check_time(self, rule_uuid: str | None) -> None:
        """Raise once the rules ran longer than ``max_seconds``."""
        if time.monotonic() > self.deadline:
            raise RuleLimitExceeded(
                f"inspection rules ran longer than [inspection_rules]max_seconds = "
                f"{self.limits.max_seconds:g} s for this callback", rule_uuid)

    def check_loop(self, count: int, rule_uuid: str | None) -> None:
        """Raise for a loop over more than ``max_loop_items`` items."""
        if count > self.limits.max_loop_items:
            raise RuleLimitExceeded(
                f"inspection rule {rule_uuid} loops over {count} items, more than "
                f"[inspection_rules]max_loop_items = {self.limits.max_loop_items}", rule_uuid)

    def check_write(self, values: Any, rule_uuid: str | None) -> None:
        """Count what an action writes; raise past ``max_value_size`` or, in total,
        ``max_node_size``."""
        size = len(json.dumps(values, default=str))
        if size > self.limits.max_value_size:
            raise RuleLimitExceeded(
                f"inspection rule {rule_uuid} writes a value of {size} bytes, more than "
                f"[inspection_rules]max_value_size = {self.limits.max_value_size}", rule_uuid)
        self.written += size
        if self.written > self.limits.max_node_size:
            raise RuleLimitExceeded(
                f"inspection rules wrote {self.written} bytes for this callback, more than "
                f"[inspection_rules]max_node_size = {self.limits.max_node_size}", rule_uuid)


def node_size(fields: dict[str, Any]) -> int:
    """Bytes a node's JSON fields take stored."""
    return len(json.dumps(fields, default=str))
