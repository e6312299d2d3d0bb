"""Validation reports every problem with its path, and never raises anything else."""

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from inspection.rules import Rule, RuleValidationError, check_rule, validate_rule

LOG = [{"op": "log", "args": ["x"]}]


@pytest.mark.parametrize(("doc", "problems"), [
    ({}, ["actions: required"]),
    ([], ["rule: must be an object"]),
    ({"actions": []}, ["actions: needs at least 1 item(s)"]),
    ({"actions": LOG, "built_in": True},
     ["built_in: cannot be set: built-in rules come from the configuration file"]),
    ({"actions": LOG, "phase": "late"}, ["phase: must be one of: early, preprocess, main"]),
    ({"actions": LOG, "priority": 10000},
     ["priority: must be between 0 and 9999 (other values are reserved for built-in rules)"]),
    ({"actions": LOG, "priority": -1},
     ["priority: must be between 0 and 9999 (other values are reserved for built-in rules)"]),
    ({"actions": LOG, "priority": True}, ["priority: must be an integer"]),
    ({"actions": LOG, "uuid": "nope"}, ["uuid: must be a UUID"]),
    ({"actions": LOG, "description": "x" * 256}, ["description: must be at most 255 characters"]),
    ({"actions": LOG, "phase": "early", "scope": "lab"},
     ["scope: cannot be used in the early phase (there is no node to match it against yet)"]),
    ({"actions": [{"op": "set-attribute", "args": {"value": 1}}]},
     ["actions[0].args.path: required"]),
    ({"actions": [{"op": "log", "args": ["a", "info", "extra"]}]},
     ["actions[0].args[2]: too many arguments (at most 2)"]),
    ({"actions": [{"op": "log", "args": {"msg": "a", "colour": "red"}}]},
     ["actions[0].args.colour: unknown argument (expected: msg, level)"]),
    ({"actions": [{"op": "log", "args": {"msg": "a", "level": "loud"}}]},
     ["actions[0].args.level: must be one of debug, info, warning, error, critical"]),
    ({"actions": [{"op": "frobnicate"}]}, ["actions[0].op: unknown action 'frobnicate'; known: "
                                            "add-trait, del-attribute, del-port-attribute, "
                                            "extend-attribute, extend-plugin-data, "
                                            "extend-port-attribute, fail, log, remove-trait, "
                                            "set-attribute, set-capability, "
                                            "set-plugin-data, set-port-attribute, "
                                            "unset-capability, unset-plugin-data"]),
    ({"actions": [{"op": "!fail", "args": ["x"]}]},
     ["actions[0].op: '!' (negation) only applies to conditions"]),
    ({"actions": [{"op": "set-attribute", "args": ["uuid", "x"]}]},
     ["actions[0].args.path: 'uuid' cannot be changed by rules; allowed: driver_info, "
      "properties, extra, instance_info, name, resource_class, driver, conductor_group, "
      "maintenance"]),
    ({"actions": [{"op": "set-attribute", "args": ["{{ /uuid }}", "x"]}]},
     ["actions[0].args.path: 'uuid' cannot be changed by rules; allowed: driver_info, "
      "properties, extra, instance_info, name, resource_class, driver, conductor_group, "
      "maintenance"]),
    ({"actions": [{"op": "set-attribute", "args": ["/uuid", "x"]}]},
     ["actions[0].args.path: 'uuid' cannot be changed by rules; allowed: driver_info, "
      "properties, extra, instance_info, name, resource_class, driver, conductor_group, "
      "maintenance"]),
    ({"actions": LOG, "conditions": [{"op": "!!eq", "args": [1, 1]}]},
     ["conditions[0].op: malformed op: a name, optionally preceded by '!'"]),
    ({"actions": LOG, "conditions": [{"op": "eq", "args": [1]}]},
     ["conditions[0].args: needs at least two values to compare"]),
    ({"actions": LOG, "conditions": [{"op": "matches", "args": ["x", "(unclosed"]}]},
     ["conditions[0].args.regex: invalid regular expression: missing ) at position 9"]),
    ({"actions": LOG, "conditions": [{"op": "in-net", "args": ["{inventory[bmc_address]}",
                                                               "10.0.0.0/33"]}]},
     ["conditions[0].args.subnet: invalid network: '10.0.0.0/33' does not appear to be an "
      "IPv4 or IPv6 network"]),
    ({"actions": LOG, "conditions": [{"op": "eq", "args": [1, 1], "multiple": "most"}]},
     ["conditions[0].multiple: must be one of: any, all, first, last"]),
    ({"actions": LOG, "conditions": [{"op": "is-true", "args": ["{item}"], "loop": "x{y}"}]},
     ["conditions[0].loop: unknown name 'y' in {y}; available: node, inventory, plugin_data, "
      "ports, port_groups, item"]),
    ({"actions": LOG, "conditions": [{"op": "is-true", "args": ["{item}"], "loop": 5}]},
     ["conditions[0].loop: must be a list or an object or a string"]),
    ({"actions": [{"op": "log", "args": ["x"], "multiple": "all"}]},
     ["actions[0].multiple: unknown field (allowed: args, loop, op)"]),
])
def test_problems(doc, problems):
    assert check_rule(doc) == problems
    with pytest.raises(RuleValidationError) as info:
        validate_rule(doc)
    assert info.value.problems == problems


def test_every_problem_is_reported_at_once():
    problems = check_rule({
        "priority": 20000, "phase": "main", "surprise": 1,
        "conditions": [{"op": "nope"}, {"op": "contains", "args": {"value": "x"}}],
        "actions": [{"op": "set-attribute", "args": {}}, {"args": []}]})
    assert problems == [
        "surprise: unknown field (allowed: actions, conditions, description, phase, priority, "
        "scope, sensitive, uuid)",
        "actions[1].op: required",
        "priority: must be between 0 and 9999 (other values are reserved for built-in rules)",
        "conditions[0].op: unknown condition 'nope'; known: is-true, is-false, is-none, "
        "is-empty, eq, lt, gt, in-net, contains, matches, one-of",
        "conditions[1].args.regex: required",
        "actions[0].args.path: required",
        "actions[0].args.value: required",
    ]


def test_sensitive_rules_do_not_leak_values_in_errors():
    problems = check_rule({"sensitive": True, "actions": [
        {"op": "set-attribute", "args": ["/uuid/pw", "hunter2"]},
        {"op": "set-attribute", "args": ["/driver_info/pw", "{inventory[hunter3}"]},
        {"op": "hunter4"}]})
    text = " ".join(problems)
    assert len(problems) == 3
    assert "hunter" not in text and "driver_info/pw" not in text


def test_built_in_rules_may_use_reserved_priorities():
    assert isinstance(validate_rule({"actions": LOG, "priority": -5}, built_in=True), Rule)
    assert validate_rule({"actions": LOG, "priority": 10000}, built_in=True).priority == 10000


def test_default_scope_fills_missing_scope_except_early():
    assert validate_rule({"actions": LOG}, default_scope="lab").scope == "lab"
    assert validate_rule({"actions": LOG, "scope": "x"}, default_scope="lab").scope == "x"
    assert validate_rule({"actions": LOG, "phase": "early"}, default_scope="lab").scope is None


def test_uuid_is_normalised_and_generated():
    rule = validate_rule({"actions": LOG, "uuid": "A0B1C2D3-0000-4000-8000-00000000000A"})
    assert rule.uuid == "a0b1c2d3-0000-4000-8000-00000000000a"
    assert validate_rule({"actions": LOG}).uuid != validate_rule({"actions": LOG}).uuid


def test_sensitive_rule_representation_hides_conditions_and_actions():
    rule = validate_rule({"actions": LOG, "sensitive": True,
                          "conditions": [{"op": "eq", "args": [1, 1]}]})
    assert rule.to_dict()["actions"] is None and rule.to_dict()["conditions"] is None
    assert "actions" not in rule.to_dict(detail=False)
    assert "log" not in repr(rule)


# Property-based: any JSON-like document is either a valid rule or a list of problems.
json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                          max_leaves=12)
op_names = st.sampled_from(["eq", "!eq", "! lt", "gt", "is-true", "is-empty", "in-net",
                            "contains", "matches", "one-of", "fail", "log", "set-attribute",
                            "del-attribute", "set-port-attribute", "set-plugin-data",
                            "extend-plugin-data", "add-trait", "set-capability", "!!x",
                            "nope"]) | st.text(max_size=6)
template_text = st.sampled_from(["{inventory[a]}", "{node.driver_info[x]}", "{item}", "{",
                                 "}", "{{", "{ports[0]}", "{node.__class__}", "/extra/a",
                                 "x{plugin_data[k]}y", "192.0.2.0/24", "(", "info"])
arg_value = json_value | template_text
op_doc = st.fixed_dictionaries(
    {"op": op_names},
    optional={"args": st.lists(arg_value, max_size=4)
              | st.dictionaries(st.sampled_from(["value", "values", "path", "msg", "regex",
                                                 "force_strings", "unique", "x"]), arg_value,
                                max_size=3),
              "loop": arg_value, "multiple": st.sampled_from(["any", "all", "first", "x"])})
rule_doc = st.fixed_dictionaries(
    {}, optional={"actions": st.lists(op_doc, max_size=3) | json_value,
                  "conditions": st.lists(op_doc, max_size=3) | json_value,
                  "phase": st.sampled_from(["early", "preprocess", "main", "x"]) | json_value,
                  "priority": st.integers() | json_value, "sensitive": st.booleans(),
                  "scope": st.text(max_size=5) | st.none(), "uuid": st.uuids().map(str)
                  | st.text(max_size=5), "description": st.text(max_size=10)})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_doc | json_value)
@example({"actions": [{"op": "log", "args": [None, []]}]})  # an unhashable log level
def test_random_documents_never_crash(doc):
    problems = check_rule(doc)
    assert isinstance(problems, list)
    assert not any(p.startswith("rule: cannot be validated") for p in problems)
    if problems:
        with pytest.raises(RuleValidationError):
            validate_rule(doc)
    else:
        assert isinstance(validate_rule(doc), Rule)
