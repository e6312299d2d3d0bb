"""Phases, scope, ordering, explain, and the spec's two built-in rule files."""

import pathlib

import pytest

from inspection.rules import (
    BuiltInRulesFileError,
    InMemoryNode,
    InspectionFailed,
    RulesEngine,
    interface_supported,
    load_built_in_rules,
    validate_rule,
)
from tests.unit.rules.conftest import make_rule

ETC = pathlib.Path(__file__).resolve().parents[3] / "etc" / "ironic-inspection" / "rules"


def marker(name, **fields):
    return make_rule(actions=[{"op": "extend-plugin-data", "args": ["/order", name]}], **fields)


@pytest.mark.parametrize("phase", ["early", "preprocess", "main"])
def test_only_rules_of_the_phase_run(phase, inventory, node):
    rules = [marker(p, phase=p) for p in ("early", "preprocess", "main")]
    data = {}
    RulesEngine().apply(rules, phase, inventory, data, node)
    assert data == {"order": [phase]}


@pytest.mark.parametrize(("node_scope", "ran"), [
    (None, ["unscoped"]), ("lab", ["lab", "unscoped"]), ("prod", ["prod", "unscoped"])])
def test_scope(node_scope, ran, inventory, node):
    if node_scope:
        node.node["properties"]["inspection_scope"] = node_scope
    rules = [marker("lab", phase="main", scope="lab"), marker("prod", phase="main", scope="prod"),
             marker("unscoped", phase="main")]
    data = {}
    RulesEngine().apply(rules, "main", inventory, data, node)
    assert sorted(data["order"]) == ran


def test_priority_high_to_low_then_creation_order(inventory, node):
    first = marker("a-first", phase="main", priority=5)
    second = marker("b-second", phase="main", priority=5)
    first.order, second.order = 1, 2
    rules = [marker("low", phase="main", priority=0), second,
             marker("builtin-high", phase="main", priority=10001), first,
             marker("builtin-negative", phase="main", priority=-3)]
    data = {}
    RulesEngine().apply(rules, "main", inventory, data, node)
    assert data["order"] == ["builtin-high", "a-first", "b-second", "low", "builtin-negative"]


def test_later_rules_see_earlier_changes(inventory, node):
    set_it = make_rule(actions=[{"op": "set-attribute", "args": ["/extra/stage", 1]}],
                       phase="main", priority=2)
    check = make_rule([{"op": "eq", "args": ["{node.extra[stage]}", 1]}],
                      [{"op": "set-attribute", "args": ["/extra/seen", True]}], phase="main")
    RulesEngine().apply([check, set_it], "main", inventory, {}, node)
    assert node.node["extra"] == {"stage": 1, "seen": True}


def test_failing_rule_stops_later_rules(inventory, node):
    rules = [make_rule(actions=[{"op": "fail", "args": ["no"]}], phase="main", priority=9),
             marker("never", phase="main")]
    data = {}
    with pytest.raises(InspectionFailed, match="no"):
        RulesEngine().apply(rules, "main", inventory, data, node)
    assert data == {}


def test_phase_arguments_are_checked(inventory, node):
    with pytest.raises(ValueError, match="needs a node"):
        RulesEngine().apply([], "main", inventory, {})
    with pytest.raises(ValueError, match="unknown phase"):
        RulesEngine().apply([], "late", inventory, {}, node)


@pytest.mark.parametrize(("interface", "supported", "expected"), [
    ("agent", ["agent"], True), ("redfish", ["agent"], False),
    ("inspector", ["^(agent|inspector)$"], True), ("redfish", [".*"], True),
    (None, ["agent"], False), ("a(b", ["a(b"], True),
])
def test_interface_supported(interface, supported, expected):
    assert interface_supported(interface, supported) is expected


def spec_rules():
    return (load_built_in_rules(str(ETC / "discovered-ipmi.yaml"))
            + load_built_in_rules(str(ETC / "dell-ipv6.yaml")))


def test_spec_examples_configure_a_discovered_dell(inventory):
    node = InMemoryNode({"uuid": "n", "auto_discovered": True, "driver": "fake-hardware"})
    plugin_data = {"bmc_address": inventory["bmc_address"]}
    rules = spec_rules()
    assert all(r.built_in for r in rules)
    # Sensitive exactly where a secret is written, so the others can be read back.
    assert [r.sensitive for r in rules] == [
        "password" in str(r.actions) for r in rules] == \
        [False, True, False, True]
    ran = RulesEngine().apply(rules, "main", inventory, plugin_data, node)
    assert len(ran) == 4
    assert node.node["driver"] == "idrac"  # all ran at priority 0, the Dell rules last
    assert node.node["driver_info"] == {
        "ipmi_address": "192.168.25.31", "ipmi_username": "admin", "ipmi_password": "pa$$w0rd",
        "redfish_address": "https://[2001:db8:25::31]", "redfish_username": "root",
        "redfish_password": "calvin"}


@pytest.mark.parametrize(("change", "ran"), [
    ({"auto_discovered": False}, 0),
    ({"manufacturer": "HPE"}, 2),
    ({"bmc_v6address": "::/0"}, 2),
    ({"no_bmc": True}, 2),
])
def test_spec_examples_skip_other_machines(change, ran, inventory):
    node = InMemoryNode({"uuid": "n", "auto_discovered": change.get("auto_discovered", True)})
    if "manufacturer" in change:
        inventory["system_vendor"]["manufacturer"] = change["manufacturer"]
    if "bmc_v6address" in change:
        inventory["bmc_v6address"] = change["bmc_v6address"]
    plugin_data = {} if change.get("no_bmc") else {"bmc_address": inventory["bmc_address"]}
    assert len(RulesEngine().apply(spec_rules(), "main", inventory, plugin_data, node)) == ran


def test_built_in_file_problems_are_all_reported(tmp_path):
    path = tmp_path / "rules.yaml"
    same = "- uuid: 0a5c3d2e-8c59-4c3a-9b1e-5f6f0b0e0001\n  actions: [{op: log, args: [a]}]\n"
    path.write_text("- actions: [{op: nope}]\n- priority: x\n  actions: [{op: log, args: [a]}]\n"
                    + same + same)
    with pytest.raises(BuiltInRulesFileError) as info:
        load_built_in_rules(str(path))
    assert str(path) in str(info.value)
    assert info.value.problems[0].startswith("rule 0: actions[0].op: unknown action 'nope'")
    assert info.value.problems[1:] == ["rule 1: priority: must be an integer",
                                       "rule 3: uuid: same as rule 2"]


@pytest.mark.parametrize(("content", "problem"), [
    ("- [unclosed", "line 1, column 12: invalid YAML"),
    ("{a: 1}", "the file must hold a list of rules"),
])
def test_built_in_file_that_is_not_a_rule_list(tmp_path, content, problem):
    path = tmp_path / "rules.yaml"
    path.write_text(content)
    with pytest.raises(BuiltInRulesFileError, match=problem):
        load_built_in_rules(str(path))


def test_missing_built_in_file(tmp_path):
    with pytest.raises(BuiltInRulesFileError, match="cannot read: No such file"):
        load_built_in_rules(str(tmp_path / "absent.yaml"))
    assert load_built_in_rules(None) == []


def test_explain_reports_every_rule_without_changing_anything(inventory, node):
    node.node["properties"]["inspection_scope"] = "lab"
    rules = [
        make_rule([{"op": "gt", "args": ["{inventory[memory][physical_mb]}", 1024]},
                   {"op": "in-net", "args": ["{item[ipv4_address]}", "10.20.0.0/16"],
                    "loop": "{inventory[interfaces]}"}],
                  [{"op": "set-attribute", "args": ["/extra/big", True]},
                   {"op": "set-capability",
                    "args": ["memory", "{inventory[memory][physical_mb]}"]}],
                  phase="main", priority=10, description="big"),
        make_rule([{"op": "eq", "args": ["{node.extra[big]}", True]}],
                  [{"op": "fail", "args": ["big node {node.name}"]}], phase="main"),
        make_rule([], phase="main", scope="prod"),
        make_rule([], phase="early", priority=3),
        make_rule([{"op": "is-true", "args": [False]}], phase="preprocess"),
    ]
    report = RulesEngine().explain(rules, inventory, {}, node)
    assert [r["phase"] for r in report] == ["early", "preprocess", "main", "main", "main"]
    report = report[2:] + report[:2]  # main rules first below
    by_desc = report[0]
    assert by_desc["description"] == "big" and by_desc["would_run"]
    assert by_desc["conditions"][0] == {"op": "gt", "args": {"values": [393216, 1024]},
                                        "result": True}
    assert [i["result"] for i in by_desc["conditions"][1]["iterations"]] == [False, False, True]
    assert by_desc["actions"][1] == {"op": "set-capability",
                                     "args": {"name": "memory", "value": 393216}}
    assert report[1]["outcome"] == "would fail inspection"
    assert report[1]["message"] == "big node r640-1"  # sees the simulated extra[big]
    assert report[2]["scope_matches"] is False and report[2]["outcome"] == "not reached"
    assert report[3]["phase"] == "early"
    assert [r["outcome"] for r in report] == ["applied", "would fail inspection",
                                              "not reached", "applied", "skipped"]
    assert report[4]["conditions_match"] is False
    assert node.node["extra"] == {} and "memory" not in node.node["properties"]["capabilities"]


def test_explain_one_phase_and_sensitive(inventory):
    secret = make_rule([{"op": "is-true", "args": [True]}], phase="main", sensitive=True)
    early = make_rule([], phase="early")
    early_report, report = RulesEngine().explain([secret, early], inventory, {}, phase="main")
    assert report["would_run"] and report["conditions"] is None
    assert report["actions"] is None
    assert early_report["phase_matches"] is False and early_report["would_run"] is False


def test_stored_rule_that_became_invalid_fails_clearly(inventory, node):
    rule = validate_rule({"phase": "main", "actions": [{"op": "log", "args": ["x"]}]})
    rule.actions = [{"op": "uninstalled-plugin"}]
    rule.compiled = None
    with pytest.raises(Exception, match="no longer valid"):
        RulesEngine().apply([rule], "main", inventory, {}, node)
