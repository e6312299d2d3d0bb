"""The provision state machine: every transition in the table, and refusals."""

import pytest

from inspection import states
from inspection.db.models import Node

ALL_STATES = ("enroll", "manageable", "inspecting", "inspect wait", "inspect failed",
              "available", "active", None)
EVENTS = (states.MANAGE, states.INSPECT, states.DONE, states.FAIL, states.ABORT)


@pytest.mark.parametrize(("state", "event", "expected"), [
    ("enroll", "manage", ("manageable", None)),
    ("available", "manage", ("manageable", None)),
    ("inspect failed", "manage", ("manageable", None)),
    ("manageable", "inspect", ("inspect wait", "manageable")),
    ("inspect failed", "inspect", ("inspect wait", "manageable")),
    ("inspect wait", "done", ("manageable", None)),
    ("inspecting", "done", ("manageable", None)),
    ("inspect wait", "fail", ("inspect failed", None)),
    ("inspecting", "fail", ("inspect failed", None)),
    ("inspect wait", "abort", ("inspect failed", None)),
])
def test_transitions(state, event, expected):
    node = Node(uuid="u", provision_state=state, target_provision_state="x")
    states.apply(node, event)
    assert (node.provision_state, node.target_provision_state) == expected


@pytest.mark.parametrize("state", ALL_STATES)
@pytest.mark.parametrize("event", EVENTS)
def test_anything_else_is_refused_and_changes_nothing(state, event):
    if states.allowed(state, event):
        return
    node = Node(uuid="n-1", provision_state=state, target_provision_state="kept")
    with pytest.raises(states.TransitionRefused) as exc:
        states.apply(node, event)
    assert exc.value.code == 400 and f'"{event}"' in str(exc.value)
    assert (node.provision_state, node.target_provision_state) == (state, "kept")


@pytest.mark.parametrize("move", [states.finish, states.fail])
def test_a_discovered_node_stays_enrolled_whatever_processing_ends_with(move):
    node = Node(uuid="d", provision_state="enroll", auto_discovered=True)
    assert states.processable(node) == (True, "")
    move(node)
    assert (node.provision_state, node.target_provision_state) == ("enroll", None)


def test_processing_ends_an_inspection_as_ironic_does():
    done = Node(uuid="a", provision_state="inspect wait", target_provision_state="manageable")
    failed = Node(uuid="b", provision_state="inspect wait", target_provision_state="manageable")
    states.finish(done)
    states.fail(failed)
    assert (done.provision_state, failed.provision_state) == ("manageable", "inspect failed")


@pytest.mark.parametrize(("columns", "why"), [
    ({"provision_state": "enroll", "auto_discovered": True, "last_error": "x"},
     "already processed"),
    ({"provision_state": "enroll", "auto_discovered": False}, "not 'inspect wait'"),
    ({"provision_state": "inspect failed"}, "aborted, timed out or already finished"),
])
def test_what_is_not_processable_says_why(columns, why):
    ok, reason = states.processable(Node(uuid="n", **columns))
    assert not ok and why in reason
