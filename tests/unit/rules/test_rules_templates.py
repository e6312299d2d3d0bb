"""Interpolation: whole-value objects, strings, escapes, and attempts to break out."""

import pytest

from inspection.rules import RuleValidationError, validate_rule
from inspection.rules.errors import TemplateError
from inspection.rules.template import Scope, parse, render
from tests.unit.rules.conftest import make_rule, run


def scope(inventory, plugin_data=None, mask=True):
    return Scope(inventory, plugin_data or {}, mask=mask)


@pytest.mark.parametrize(("text", "expected"), [
    ("{inventory[memory][physical_mb]}", 393216),
    ("{inventory[cpu][flags][0]}", "fpu"),
    ("{inventory[interfaces][-1][name]}", "ens3f0"),
    ("{inventory.memory.physical_mb}", 393216),
    ("{inventory[boot]}", {"current_boot_mode": "uefi", "pxe_interface": "e4:43:4b:5c:10:a0"}),
    ("mem={inventory[memory][physical_mb]}MB", "mem=393216MB"),
    ("{{literal}} {inventory[cpu][count]}", "{literal} 80"),
    ("no braces", "no braces"),
    ("{plugin_data[a:b]}", "colon key"),
])
def test_render(text, expected, inventory):
    assert render(parse(text), scope(inventory, {"a:b": "colon key"})) == expected


@pytest.mark.parametrize("text", [
    "{node.__class__}", "{inventory.__init__}", "{0.__class__}", "{inventory[__class__]}",
    "{inventory[_private]}", "{inventory._x}", "{inventory!r}", "{inventory:>10}",
    "{inventory[memory]:{inventory}}", "{inventory.keys()}", "{__import__}", "{globals}",
    "{inventory", "inventory}", "{}", "{inventory[memory}", "{item.__dict__}",
    "{node.driver_info[ipmi_password].__class__}", "{inventory[a]{b}}",
])
def test_escape_attempts_are_syntax_errors(text):
    with pytest.raises(TemplateError):
        parse(text)


@pytest.mark.parametrize("text", ["{node.__class__}", "{inventory.__init__}", "{0.__class__}",
                                  "{inventory[memory]!r}", "{inventory:%s}"])
def test_escape_attempts_fail_validation_with_path(text):
    with pytest.raises(RuleValidationError) as info:
        validate_rule({"conditions": [{"op": "eq", "args": [text, 1]}],
                       "actions": [{"op": "log", "args": ["x"]}]})
    assert info.value.problems[0].startswith("conditions[0].args.values[0]: ")


def test_node_attributes_outside_the_allow_list_are_refused(inventory, node):
    rule = make_rule(actions=[{"op": "set-plugin-data",
                               "args": ["/x", "{node.driver_internal_info}"]}], phase="main")
    with pytest.raises(Exception, match="no readable field 'driver_internal_info'"):
        run([rule], inventory, node=node)


def test_ramdisk_supplied_braces_are_never_formatted_again(inventory, node):
    inventory = {**inventory, "hostname": "{node.driver_info[ipmi_password]}"}
    plugin_data = {}
    rule = make_rule(actions=[
        {"op": "set-plugin-data", "args": ["/whole", "{inventory[hostname]}"]},
        {"op": "set-plugin-data", "args": ["/mixed", "host={inventory[hostname]}"]},
        {"op": "set-plugin-data", "args": ["/looped", "{item}"],
         "loop": ["{inventory[hostname]}"]},
        {"op": "set-attribute", "args": ["/extra/{inventory[hostname]}", 1]},
    ], phase="main")
    run([rule], inventory, plugin_data, node=node, mask="never")
    assert plugin_data == {"whole": "{node.driver_info[ipmi_password]}",
                           "mixed": "host={node.driver_info[ipmi_password]}",
                           "looped": "{node.driver_info[ipmi_password]}"}
    assert node.node["extra"] == {"{node.driver_info[ipmi_password]}": 1}


def test_regex_arguments_are_not_templates(inventory):
    rule = make_rule([{"op": "matches", "args": ["{inventory[system_vendor][serial_number]}",
                                                 "[0-9A-Z]{7}"]}])
    assert run([rule], inventory, phase="early")


def test_ports_and_port_groups(inventory, node):
    node.port_group_list.append({"uuid": "pg", "name": "bond0", "address": None,
                                 "mode": "802.3ad", "extra": {}, "properties": {}})
    data = {}
    rule = make_rule(actions=[
        {"op": "set-plugin-data", "args": ["/macs", "{ports}"]},
        {"op": "set-plugin-data", "args": ["/first", "{ports[0][address]}"]},
        {"op": "set-plugin-data", "args": ["/bond", "{port_groups[0][mode]}"]}], phase="main")
    run([rule], inventory, data, node=node)
    assert data["first"] == "e4:43:4b:5c:10:a0" and data["bond"] == "802.3ad"
    assert data["macs"][0]["uuid"] == node.port_list[0]["uuid"]


def test_node_only_names_are_refused_in_the_early_phase():
    with pytest.raises(RuleValidationError) as info:
        validate_rule({"phase": "early",
                       "conditions": [{"op": "is-true", "args": ["{node.auto_discovered}"]}],
                       "actions": [{"op": "set-plugin-data", "args": ["/p", "{ports}"]},
                                   {"op": "set-attribute", "args": ["/extra/x", 1]}]})
    assert info.value.problems == [
        "conditions[0].args.value: {node} is not available in the early phase (there is no "
        "node yet)",
        "actions[0].args.value: {ports} is not available in the early phase (there is no node "
        "yet)",
        "actions[1].op: action 'set-attribute' needs a node and cannot run in the early phase",
    ]


def test_item_outside_a_loop_is_refused():
    with pytest.raises(RuleValidationError, match=r"actions\[0\].args.msg: \{item\} is only"):
        validate_rule({"actions": [{"op": "log", "args": ["{item}"]}]})
