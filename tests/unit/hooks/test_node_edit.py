"""Hooks and rules change a node through one editor: same traits, same MAC matching."""

import pytest

from inspection.hooks.context import InspectionContext
from inspection.node_edit import InvalidChange
from inspection.rules import OrmNode
from inspection.rules.errors import ActionError
from tests.unit.hooks.helpers import make_node

STORED = "52:54:00:ab:cd:01"


@pytest.mark.parametrize("trait", ["lower_case", "CUSTOM-DASH", "", "X" * 256, 7])
def test_hooks_and_rules_refuse_the_same_traits(session, conf, trait):
    node = make_node(session)
    ctx = InspectionContext.load(session, node, {}, {}, conf)
    with pytest.raises(InvalidChange) as hook_error:
        ctx.edit.add_trait(trait)
    with pytest.raises(ActionError) as rule_error:
        OrmNode(session, node, ctx.edit).add_trait(trait)
    assert str(hook_error.value) == str(rule_error.value)
    assert ctx.edit.traits() == []


@pytest.mark.parametrize("spelling", [STORED, STORED.upper(), STORED.replace(":", "-")])
def test_hooks_and_rules_find_a_port_by_any_spelling_of_its_mac(session, conf, spelling):
    node = make_node(session, ports=[(STORED, True)])
    ctx = InspectionContext.load(session, node, {}, {}, conf)
    assert ctx.edit.find_port(spelling) is ctx.edit.ports[0]
    OrmNode(session, node, ctx.edit).port_set(spelling, "/physical_network", "physnet1")
    assert ctx.edit.ports[0].physical_network == "physnet1"


def test_a_rule_sees_the_ports_a_hook_created(session, conf):
    node = make_node(session)
    ctx = InspectionContext.load(session, node, {}, {}, conf)
    ctx.edit.create_port("52:54:00:ab:cd:02")
    rules_view = OrmNode(session, node, ctx.edit)
    assert [p["address"] for p in rules_view.ports()] == ["52:54:00:ab:cd:02"]
