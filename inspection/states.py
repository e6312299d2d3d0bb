"""The node provision state machine: Ironic's states and the events this service uses.

This is the only code that changes ``provision_state`` and ``target_provision_state``, and
that decides which nodes inspection data may be processed for. A refused event raises
:class:`TransitionRefused`, which the API answers as Ironic does (400). One rule is not an
event: a node that auto-discovery just enrolled stays ``enroll`` whatever its processing
ends with (as in Ironic: its driver is not verified, and ``inspect failed`` would claim it
was once ``manageable``).
"""

from inspection.db.models import (
    AVAILABLE,
    ENROLL,
    INSPECT_FAILED,
    INSPECT_WAIT,
    INSPECTING,
    MANAGEABLE,
    Node,
)
from inspection.errors import InspectionServiceError

#: Events, named as Ironic names them.
MANAGE, INSPECT, DONE, FAIL, ABORT = "manage", "inspect", "done", "fail", "abort"

#: (state, event) -> (new provision_state, new target_provision_state).
TRANSITIONS: dict[tuple[str, str], tuple[str, str | None]] = {
    (ENROLL, MANAGE): (MANAGEABLE, None),
    (AVAILABLE, MANAGE): (MANAGEABLE, None),
    (INSPECT_FAILED, MANAGE): (MANAGEABLE, None),
    (MANAGEABLE, INSPECT): (INSPECT_WAIT, MANAGEABLE),
    (INSPECT_FAILED, INSPECT): (INSPECT_WAIT, MANAGEABLE),
    (INSPECT_WAIT, DONE): (MANAGEABLE, None),
    (INSPECTING, DONE): (MANAGEABLE, None),
    (INSPECT_WAIT, FAIL): (INSPECT_FAILED, None),
    (INSPECTING, FAIL): (INSPECT_FAILED, None),
    (INSPECT_WAIT, ABORT): (INSPECT_FAILED, None),
}

#: The state of a node when it is created (through the API or by auto-discovery).
INITIAL = ENROLL


class TransitionRefused(InspectionServiceError):
    """The event is not possible in the node's provision state (Ironic: 400)."""

    code = 400

    def __init__(self, event: str, node: str, state: str | None) -> None:
        super().__init__(f'The requested action "{event}" can not be performed on node '
                         f'"{node}" while it is in state "{state}".')
        self.event, self.state = event, state


def allowed(state: str | None, event: str) -> bool:
    """Whether ``event`` is possible in ``state``."""
    return (state or "", event) in TRANSITIONS


def stays_enrolled(node: Node) -> bool:
    """Whether ``node`` was enrolled by auto-discovery and not managed since."""
    return node.provision_state == ENROLL and bool(node.auto_discovered)


def processable(node: Node) -> tuple[bool, str]:
    """Whether inspection data may be processed for ``node`` now, and if not, why.

    Nodes in ``inspect wait``; or nodes just enrolled by auto-discovery, never inspected and
    without an error (so a repeated task does not process them twice).
    """
    if node.provision_state == INSPECT_WAIT:
        return True, ""
    if stays_enrolled(node):
        if node.inspection_finished_at is None and not node.last_error:
            return True, ""
        return False, "it was auto-discovered and its inspection data was already processed"
    return False, f"it is in state {node.provision_state!r}, not {INSPECT_WAIT!r} (inspection " \
                  f"was aborted, timed out or already finished)"


def finish(node: Node) -> None:
    """Processing succeeded: ``manageable``, or ``enroll`` kept for a discovered node."""
    if stays_enrolled(node):
        node.target_provision_state = None
    else:
        apply(node, DONE)


def fail(node: Node) -> None:
    """Inspection failed: ``inspect failed``, or ``enroll`` kept for a discovered node."""
    if stays_enrolled(node):
        node.target_provision_state = None
    else:
        apply(node, FAIL)


def apply(node: Node, event: str) -> None:
    """Move ``node`` along ``event`` (in its session, not committed); raises
    :class:`TransitionRefused`."""
    try:
        node.provision_state, node.target_provision_state = TRANSITIONS[
            (node.provision_state or "", event)]
    except KeyError:
        raise TransitionRefused(event, node.uuid, node.provision_state) from None

