"""Every condition, negation, and loop mode, table-driven against a real IPA inventory."""

import threading
import time

import pytest

from inspection.rules.conditions import MAX_REGEX_SUBJECT
from tests.unit.rules.conftest import make_rule, run

CASES = [
    # (op, args, expected)
    ("is-true", [True], True), ("is-true", ["YES"], True), ("is-true", ["True"], True),
    ("is-true", [1], True), ("is-true", [0.5], True), ("is-true", [0], False),
    ("is-true", ["no"], False), ("is-true", ["random"], False), ("is-true", [None], False),
    ("is-false", [False], True), ("is-false", ["No"], True), ("is-false", ["FALSE"], True),
    ("is-false", [0], True), ("is-false", [None], True), ("is-false", ["random"], False),
    ("is-false", [1], False),
    ("is-none", [None], True), ("is-none", [""], False), ("is-none", [0], False),
    ("is-empty", [None], True), ("is-empty", [""], True), ("is-empty", [[]], True),
    ("is-empty", [{}], True), ("is-empty", ["None"], False), ("is-empty", [0], False),
    ("is-empty", [[0]], False),
    ("eq", [1, 1, 1], True), ("eq", [1, 1, 2], False), ("eq", ["a", "a"], True),
    ("eq", {"values": [8192, "8192"]}, False),
    ("eq", {"values": [8192, "8192"], "force_strings": True}, True),
    ("lt", [1, 2, 3], True), ("lt", [1, 3, 2], False), ("lt", [2, 2], False),
    ("gt", [3, 2, 1], True), ("gt", [3, 3], False),
    ("lt", {"values": [10, 9], "force_strings": True}, True),  # "10" < "9" as strings
    ("in-net", ["192.0.2.5", "192.0.2.0/24"], True),
    ("in-net", ["192.0.3.5", "192.0.2.0/24"], False),
    ("in-net", ["2001:db8::1", "2001:db8::/32"], True),
    ("in-net", ["2001:db8::1", "192.0.2.0/24"], False),
    ("in-net", ["192.0.2.5/24", "192.0.2.0/24"], True),
    ("in-net", [None, "192.0.2.0/24"], False), ("in-net", ["not-an-ip", "10.0.0.0/8"], False),
    ("contains", ["Dell Inc.", "(?i)dell"], True), ("contains", ["HPE", "(?i)dell"], False),
    ("contains", [None, "x"], False), ("contains", [12345, "234"], True),
    ("matches", ["Dell Inc.", "Dell"], False), ("matches", ["Dell Inc.", "Dell.*"], True),
    ("matches", ["r640", r"r\d{3}"], True),
    ("one-of", ["b", ["a", "b"]], True), ("one-of", ["c", ["a", "b"]], False),
    ("one-of", [2, [1, 2]], True), ("one-of", ["2", [1, 2]], False),
]


@pytest.mark.parametrize(("op", "args", "expected"), CASES)
def test_condition(op, args, expected, inventory):
    rule = make_rule([{"op": op, "args": args}])
    assert bool(run([rule], inventory, node=None, phase="early")) is expected
    negated = make_rule([{"op": f"!{op}", "args": args}])
    assert bool(run([negated], inventory, phase="early")) is not expected
    spaced = make_rule([{"op": f"! {op}", "args": args}])
    assert bool(run([spaced], inventory, phase="early")) is not expected


@pytest.mark.parametrize(("op", "args", "expected"), [
    ("eq", ["{inventory[memory][physical_mb]}", 393216], True),
    ("gt", ["{inventory[cpu][count]}", 64], True),
    ("eq", ["{inventory[cpu][count]}", "80"], False),
    ("eq", {"values": ["{inventory[cpu][count]}", "80"], "force_strings": True}, True),
    ("eq", ["x{inventory[cpu][count]}", "x80"], True),
    ("contains", ["{inventory[system_vendor][manufacturer]}", "(?i)dell"], True),
    ("in-net", ["{inventory[bmc_address]}", "192.168.25.0/24"], True),
    ("in-net", ["{inventory[interfaces][-1][ipv6_address]}", "2001:db8::/32"], True),
    ("is-empty", ["{inventory[no_such_key]}"], True),
    ("is-none", ["{inventory[interfaces][1][ipv4_address]}"], True),
    ("one-of", ["{inventory[cpu][architecture]}", ["x86_64", "aarch64"]], True),
    ("eq", ["{plugin_data[answer]}", 42], True),
])
def test_condition_on_inventory(op, args, expected, inventory):
    rule = make_rule([{"op": op, "args": args}])
    assert bool(run([rule], inventory, {"answer": 42}, phase="early")) is expected


def test_mixed_template_with_missing_field_does_not_match_even_negated(inventory):
    rule = make_rule([{"op": "!eq", "args": ["x{inventory[nope]}", "y"]}])
    assert run([rule], inventory, phase="early") == []


def test_comparing_incompatible_types_does_not_match(inventory):
    rule = make_rule([{"op": "lt", "args": ["{inventory[cpu][model_name]}", 5]}])
    assert run([rule], inventory, phase="early") == []


# Loop over the inventory's interfaces: ipv4 addresses are "192.168.24.31", None, "10.20.0.31".
LOOP = "{inventory[interfaces]}"
LOOP_CASES = [
    # (multiple, condition args, expected)
    ("any", ["{item[ipv4_address]}", "10.20.0.0/16"], True),
    ("all", ["{item[ipv4_address]}", "10.20.0.0/16"], False),
    ("first", ["{item[ipv4_address]}", "10.20.0.0/16"], False),
    ("last", ["{item[ipv4_address]}", "10.20.0.0/16"], True),
    ("first", ["{item[ipv4_address]}", "192.168.24.0/24"], True),
    ("last", ["{item[ipv4_address]}", "192.168.24.0/24"], False),
    ("any", ["{item[ipv4_address]}", "172.16.0.0/12"], False),
]


@pytest.mark.parametrize(("multiple", "args", "expected"), LOOP_CASES)
def test_loop_modes(multiple, args, expected, inventory):
    rule = make_rule([{"op": "in-net", "args": args, "loop": LOOP, "multiple": multiple}])
    assert bool(run([rule], inventory, phase="early")) is expected


def test_loop_default_is_any_and_literal_lists_work(inventory):
    rule = make_rule([{"op": "eq", "args": ["{item}", "{inventory[cpu][architecture]}"],
                       "loop": ["aarch64", "x86_64"]}])
    assert run([rule], inventory, phase="early")


def test_all_over_every_interface(inventory):
    rule = make_rule([{"op": "matches", "args": ["{item[mac_address]}", "[0-9a-f:]{17}"],
                       "loop": LOOP, "multiple": "all"}])
    assert run([rule], inventory, phase="early")


def test_negation_applies_to_the_combined_loop_result(inventory):
    # "!one-of" must mean "not in the list", like "!eq" looped with any.
    rule = make_rule([{"op": "!eq", "args": ["{inventory[cpu][architecture]}", "{item}"],
                       "loop": ["x86_64", "ppc64le"]}])
    assert run([rule], inventory, phase="early") == []
    one_of = make_rule([{"op": "!one-of", "args": ["{inventory[cpu][architecture]}",
                                                   ["x86_64", "ppc64le"]]}])
    assert run([one_of], inventory, phase="early") == []


def test_empty_loop(inventory):
    any_rule = make_rule([{"op": "is-true", "args": ["{item}"], "loop": []}])
    all_rule = make_rule([{"op": "is-true", "args": ["{item}"], "loop": [],
                           "multiple": "all"}])
    assert run([any_rule], inventory, phase="early") == []
    assert run([all_rule], inventory, phase="early") == [all_rule.uuid]


def test_all_conditions_must_hold_and_no_conditions_always_runs(inventory):
    true = {"op": "is-true", "args": [True]}
    false = {"op": "is-false", "args": [True]}
    assert run([make_rule([true, false])], inventory, phase="early") == []
    rule = make_rule([])
    assert run([rule], inventory, phase="early") == [rule.uuid]


# -- regular expressions on ramdisk text: bounded in time and size ---------------------------

# With the standard library this pattern takes about 30 s on this subject (and holds the GIL
# throughout); the regex package has no shortcut for it either (measured).
CATASTROPHIC = r"(a|aa)+$"
SLOW_SUBJECT = "a" * 40 + "!"


@pytest.mark.parametrize("op", ["matches", "contains", "!matches", "!contains"])
def test_catastrophic_regex_times_out_without_freezing_other_threads(inventory, caplog, op):
    inventory["system_vendor"]["product_name"] = SLOW_SUBJECT
    rule = make_rule([{"op": op, "args": ["{inventory[system_vendor][product_name]}",
                                          CATASTROPHIC]}])
    spins = 0
    stop = threading.Event()

    def spin():
        nonlocal spins
        while not stop.is_set():
            spins += 1

    other = threading.Thread(target=spin)
    other.start()
    started = time.monotonic()
    try:
        with caplog.at_level("WARNING", logger="inspection.rules"):
            ran = run([rule], inventory, phase="early")
    finally:
        elapsed = time.monotonic() - started
        stop.set()
        other.join()
    assert elapsed < 2, f"the match ran {elapsed:.1f} s"
    assert ran == []  # an unevaluable condition never matches, negated or not
    assert spins > 1000  # the match did not hold the GIL
    assert any("took more than 0.1 s" in r.getMessage() for r in caplog.records), \
        caplog.text


def test_regex_subject_length_is_bounded(inventory, caplog):
    inventory["system_vendor"]["product_name"] = "x" * (MAX_REGEX_SUBJECT + 1)
    rule = make_rule([{"op": "contains", "args": ["{inventory[system_vendor][product_name]}",
                                                  "x"]}])
    with caplog.at_level("WARNING", logger="inspection.rules"):
        assert run([rule], inventory, phase="early") == []
    assert "too long for a regular expression" in caplog.text
    inventory["system_vendor"]["product_name"] = "x" * MAX_REGEX_SUBJECT
    assert run([rule], inventory, phase="early") == [rule.uuid]
