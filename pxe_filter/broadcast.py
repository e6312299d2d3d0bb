"""The PXE filter broadcast protocol and its client, shared by senders and the daemon.

Conductors (or the inspection service) announce MACs to open or close with a fanout cast;
every filter daemon applies it within milliseconds. A cast sent while a daemon is down is
lost, which is fine: each daemon's periodic full sync from the database stays the source of
truth. So :class:`FilterNotifier` never fails its caller: a failed broadcast is logged and
forgotten, and with no message bus at all (all-in-one mode) nothing is sent.
"""

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from oslo_config import cfg

from pxe_filter import policy
from pxe_filter.common import macs, messaging
from pxe_filter.common.messaging import oslo_messaging_module

EXCHANGE = "ironic"
TOPIC = "ironic.pxe_filter"
VERSION = "1.0"
METHOD = "update_pxe_filters"

#: Reconnection attempts per broadcast: a dead message bus must not stall inspection.
DEFAULT_RETRY = 2

LOG = logging.getLogger(__name__)


def target(server: str | None = None, fanout: bool = False):
    """The oslo.messaging target of the broadcast (server side: pass ``server``)."""
    om = oslo_messaging_module()
    return om.Target(exchange=EXCHANGE, topic=TOPIC, version=VERSION, server=server,
                     fanout=fanout)


def broadcast(transport, allow: Collection[str] = (), deny: Collection[str] = (),
              retry: int | None = None) -> None:
    """Fanout-cast ``update_pxe_filters`` to every filter daemon on ``transport``.

    The MACs are sent as given: the senders validate them (:meth:`FilterNotifier.update`,
    ``ironic-inspection filters notify``) and every daemon does again. ``retry`` bounds
    reconnection attempts (oslo.messaging: None retries forever, 0 never).
    """
    if not allow and not deny:
        return
    om = oslo_messaging_module()
    client = om.get_rpc_client(transport, target(fanout=True), retry=retry)
    client.cast({}, METHOD, allow=list(allow), deny=list(deny))
    LOG.debug("Broadcast %s: allow %d MAC(s), deny %d MAC(s)", METHOD, len(allow), len(deny))


@dataclass(frozen=True)
class NodePorts:
    """What a broadcast about one node is decided from: its state and its ports' MACs."""

    provision_state: str | None
    inspect_interface: str | None
    addresses: tuple[str, ...]


class FilterNotifier:
    """Tells the filters on ``transport`` (nothing if it is None) what the policy decides."""

    def __init__(self, transport=None, supported_interfaces: Collection[str] = ("agent",),
                 retry: int = DEFAULT_RETRY) -> None:
        self.transport = transport
        self.supported_interfaces = tuple(supported_interfaces)
        self.retry = retry

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> "FilterNotifier":
        """A notifier on ``[DEFAULT]transport_url`` (no-op when unset) that applies
        ``[pxe_filter]supported_inspect_interfaces`` as the filters do."""
        url = messaging.configured_transport_url(conf)
        return cls(messaging.get_transport(url) if url else None,
                   conf.pxe_filter.supported_inspect_interfaces)

    def announce(self, node: NodePorts) -> bool:
        """Open or close the node's MACs as :func:`pxe_filter.policy.pxe_allowed` decides;
        True if a broadcast was sent."""
        if self.served(node.provision_state, node.inspect_interface):
            return self.update(allow=node.addresses)
        return self.update(deny=node.addresses)

    def served(self, provision_state: str | None, inspect_interface: str | None) -> bool:
        """Whether the filters serve the ports of a node in this state (the same policy)."""
        return policy.pxe_allowed(provision_state, inspect_interface,
                                  self.supported_interfaces)

    def update(self, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> bool:
        """Broadcast both lists at once; invalid MACs are dropped with a warning."""
        allow_list, bad_allow = macs.split_valid(list(allow))
        deny_list, bad_deny = macs.split_valid(list(deny))
        if bad_allow or bad_deny:
            LOG.warning("Not broadcasting invalid MAC address(es) %s",
                        ", ".join(repr(m) for m in bad_allow + bad_deny))
        if not allow_list and not deny_list:
            return False
        if self.transport is None:
            LOG.debug("No message bus: filters will pick up allow=%s deny=%s at their next "
                      "sync", allow_list, deny_list)
            return False
        try:
            broadcast(self.transport, allow=allow_list, deny=deny_list, retry=self.retry)
        except Exception as exc:
            LOG.warning("PXE filter broadcast (allow=%s, deny=%s) failed: %s; the filters "
                        "will catch up at their next sync", allow_list, deny_list, exc)
            return False
        return True

    def close(self) -> None:
        """Release the transport (if any)."""
        if self.transport is not None:
            self.transport.cleanup()
            self.transport = None
