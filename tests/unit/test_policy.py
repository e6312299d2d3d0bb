"""Desired-state rules: Ironic's, plus deny_unknown_macs, deny-wins and MAC normalisation."""

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pxe_filter import policy
from pxe_filter.common import macs

M1, M2, M3 = "52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:03"


def _state(nodes, ports, interfaces=("agent",), discovery=False, deny_unknown=False):
    inspecting = policy.nodes_on_inspection(((*row, "", None) for row in nodes), interfaces)
    allow = {address for address, node_id in ports if node_id in inspecting}
    deny = {address for address, node_id in ports if node_id not in inspecting}
    settings = policy.Settings(discovery_enabled=discovery, deny_unknown_macs=deny_unknown)
    return policy.compute_split(allow, deny, settings.unknown_allowed(bool(inspecting)))


@pytest.mark.parametrize("state", ["inspect wait", "inspecting"])
def test_ports_of_nodes_on_inspection_are_allowed(state):
    desired = _state([(1, state, "agent")], [(M1, 1), (M2, 2)])
    assert desired.allow == {M1}
    assert desired.deny == {M2}
    assert desired.unknown_allowed  # a node is on inspection


@pytest.mark.parametrize("state,interface", [
    ("active", "agent"), ("available", "agent"), ("inspect failed", "agent"),
    ("manageable", "agent"), ("enroll", "agent"),
    ("inspect wait", "redfish"), ("inspect wait", None), ("inspecting", "no-inspect"),
])
def test_other_ports_are_denied(state, interface):
    desired = _state([(1, state, interface)], [(M1, 1), (M2, None)])
    assert desired.allow == set()
    assert desired.deny == {M1, M2}
    assert not desired.unknown_allowed


def test_supported_interfaces_option_is_honoured():
    nodes = [(1, "inspect wait", "redfish"), (2, "inspect wait", "agent")]
    desired = _state(nodes, [(M1, 1), (M2, 2)], interfaces=("redfish",))
    assert desired.allow == {M1} and desired.deny == {M2}


@pytest.mark.parametrize("discovery,inspecting,deny_unknown,expected", [
    (False, False, False, False),
    (True, False, False, True),
    (False, True, False, True),
    (True, True, False, True),
    (True, False, True, False),
    (False, True, True, False),
    (True, True, True, False),
])
def test_unknown_mac_policy(discovery, inspecting, deny_unknown, expected):
    nodes = [(1, "inspect wait" if inspecting else "active", "agent")]
    desired = _state(nodes, [(M1, 1)], discovery=discovery, deny_unknown=deny_unknown)
    assert desired.unknown_allowed is expected
    assert desired.decision(M3) is expected  # a MAC without a port follows the wildcard
    if inspecting:
        assert desired.decision(M1) is True  # deny_unknown_macs never touches known ports


def test_mac_in_both_lists_is_denied_whatever_the_row_order():
    nodes = [(1, "inspect wait", "agent"), (2, "active", "agent")]
    # Two ports carry the same MAC in different spellings, one allowed and one denied.
    rows = [(M1, 1), (M1.upper(), 2), (M2, 1)]
    for ports in (rows, list(reversed(rows))):
        desired = _state(nodes, ports)
        assert desired.deny == {M1}
        assert desired.allow == {M2}
        assert desired.decision(M1) is False


def test_database_macs_are_normalised_and_invalid_ones_skipped(caplog):
    rows = [("52-54-00-00-00-01", 1), ("5254.0000.0002", 2), ("not-a-mac", 1),
            ("52:54:00:00:00:0", 2), ("../../etc/passwd", 2), (None, 2), (M3, 2)]
    with caplog.at_level(logging.WARNING, logger="pxe_filter.policy"):
        desired = _state([(1, "inspecting", "agent")], rows)
    assert desired.allow == {M1}
    assert desired.deny == {M2, M3}
    assert desired.invalid == 3
    assert "not-a-mac" in caplog.text and "passwd" in caplog.text


def test_decision_override_moves_a_mac_between_sets():
    desired = _state([], [(M1, 1)])
    desired.set(M1, True)
    assert desired.decision(M1) is True and M1 not in desired.deny
    desired.set(M1, False)
    assert desired.decision(M1) is False and M1 not in desired.allow


_mac_like = st.text(alphabet="0123456789abcdefABCDEF:-.\n", min_size=15, max_size=19)
_canonical = st.lists(st.integers(0, 255), min_size=6, max_size=6).map(
    lambda octets: ":".join(f"{o:02x}" for o in octets))


@given(st.sets(st.one_of(_canonical, _mac_like), max_size=30))
def test_fast_canonical_check_agrees_with_the_per_mac_one(values):
    # The batch shortcut may only say "all canonical" when each MAC really is.
    assert policy._all_canonical(set(values)) == (
        bool(values) and all(macs.is_canonical(v) for v in values))
