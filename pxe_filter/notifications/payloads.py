"""Ironic's versioned notifications, read as untrusted input: which node or port may have
changed.

Only the UUIDs and a port's address matter, as hints: whatever a payload says, the filter
re-reads that node, port and MAC from the database (:mod:`pxe_filter.notifications.follower`),
so a notification can never make the files say something the database does not. Anything that is
not a well-formed Ironic notification raises :class:`Malformed` with a short reason, for one
summary log line.
"""

import json
import re
from dataclasses import dataclass

from pxe_filter.common import macs

#: Largest message accepted; Ironic's node payloads are a few kB.
MAX_MESSAGE_BYTES = 256 * 1024

#: Every provision_set notification (start, end, success, error) follows a saved state change.
PROVISION_EVENTS = "baremetal.node.provision_set."
#: Create, update and delete count once done (``.end``): the row is saved then.
NODE_EVENTS = ("baremetal.node.create.", "baremetal.node.update.", "baremetal.node.delete.")
PORT_EVENTS = ("baremetal.port.create.", "baremetal.port.update.", "baremetal.port.delete.")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12}")


class Malformed(ValueError):
    """Not a usable Ironic notification; ``str()`` is the reason (no payload content)."""


@dataclass(frozen=True)
class Hint:
    """What a notification names, to be read again: a node that may serve other MACs now, or
    a port. Nothing else in the payload is read: not its state, not its timestamp (the
    publisher's clock), not a port's node."""

    nodes: tuple[str, ...] = ()
    ports: tuple[str, ...] = ()
    #: The port's address as the payload says (a deleted port's, or its new one): only a
    #: MAC to look up, never trusted. Empty when absent or not a MAC.
    addresses: tuple[str, ...] = ()


def relevant(event_type: str) -> bool:
    """Whether this event type can change the policy (the others are counted and dropped)."""
    return event_type.startswith(PROVISION_EVENTS) or (
        event_type.startswith(NODE_EVENTS + PORT_EVENTS) and event_type.endswith(".end"))


def parse(body: object) -> Hint | None:
    """The node or port a message is about; None for events that cannot change the policy.

    ``body`` is the decoded AMQP body: oslo.messaging's envelope ``{"oslo.message": "<json>",
    "oslo.version": "2.0"}`` or the message itself. Raises :class:`Malformed`.
    """
    message = _unwrap(body)
    event_type = message.get("event_type")
    if not isinstance(event_type, str) or len(event_type) > 255:
        raise Malformed("no event_type")
    if not relevant(event_type):
        return None
    payload = message.get("payload")
    data = payload.get("ironic_object.data") if isinstance(payload, dict) else None
    if not isinstance(data, dict):
        raise Malformed(f"{event_type}: payload has no ironic_object.data object")
    uuid = data.get("uuid")
    if not isinstance(uuid, str) or not _UUID.fullmatch(uuid):
        raise Malformed(f"{event_type}: uuid is not a UUID")
    uuid = uuid.lower()
    if not event_type.startswith(PORT_EVENTS):
        return Hint(nodes=(uuid,))
    try:
        return Hint(ports=(uuid,), addresses=(macs.normalize_mac(data.get("address")),))
    except macs.InvalidMAC:
        return Hint(ports=(uuid,))


def _unwrap(body: object) -> dict:
    if isinstance(body, (bytes, bytearray, str)):
        body = _loads(body)
    if not isinstance(body, dict):
        raise Malformed("message is not a JSON object")
    inner = body.get("oslo.message")
    if inner is None:
        return body
    if not isinstance(inner, str):
        raise Malformed("oslo.message is not a JSON string")
    message = _loads(inner)
    if not isinstance(message, dict):
        raise Malformed("oslo.message is not a JSON object")
    return message


def _loads(text: str | bytes | bytearray) -> object:
    if len(text) > MAX_MESSAGE_BYTES:
        raise Malformed(f"message over {MAX_MESSAGE_BYTES} bytes")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise Malformed("message is not valid JSON") from None
