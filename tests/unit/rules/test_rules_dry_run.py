"""Trying rules on copies: the node is only read, and failures are reported, not raised."""

import logging

from inspection import metrics
from inspection.rules import RulesEngine
from inspection.rules.adapters import InMemoryNode
from inspection.rules.dry_run import quiet_engine, try_rules
from tests.unit.rules.conftest import make_rule

INVENTORY = {"memory": {"physical_mb": 8192}}


def node():
    return InMemoryNode({"uuid": "n1", "properties": {"memory_mb": 1}})


class Collect(logging.Handler):
    """What reaches the service's log handlers (oslo.log installs them on the root)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_the_node_is_only_read_and_the_log_action_writes_nothing():
    rules = [make_rule([{"op": "gt", "args": ["{inventory[memory][physical_mb]}", 4096]}],
                       [{"op": "set-attribute", "args": ["/properties/memory_mb",
                                                         "{inventory[memory][physical_mb]}"]},
                        {"op": "log", "args": ["dry run must not log this"]}],
                       phase="main")]
    original = node()
    evaluated = metrics.REGISTRY.get_sample_value("ironic_inspection_rules_evaluated_total",
                                                  {"phase": "main"})
    root, collect = logging.getLogger(), Collect()
    root.addHandler(collect)
    try:
        row = try_rules(quiet_engine(RulesEngine()), rules, INVENTORY, {}, original)
    finally:
        root.removeHandler(collect)
    assert row == {"matched": True, "changes": [
        {"path": "/properties/memory_mb", "old": 1, "new": 8192}]}
    assert original.node["properties"] == {"memory_mb": 1}
    assert not any("dry run must not log this" in line for line in collect.lines)
    assert metrics.REGISTRY.get_sample_value("ironic_inspection_rules_evaluated_total",
                                             {"phase": "main"}) == evaluated


def test_a_failing_rule_is_reported_and_a_sensitive_one_shows_nothing():
    failing = make_rule([], [{"op": "fail", "args": ["too small"]}], phase="main")
    row = try_rules(RulesEngine(), [failing], INVENTORY, {}, node())
    assert row["matched"] is True and "too small" in row["error"]
    secret = make_rule([], [{"op": "set-attribute", "args": ["/extra/site", "berlin"]},
                            {"op": "fail", "args": ["berlin"]}], phase="main", sensitive=True)
    row = try_rules(RulesEngine(), [secret], INVENTORY, {}, node())
    assert "berlin" not in repr(row) and row["changes"] == [
        {"path": "/extra/site", "old": None, "new": "***"}]
