"""Telling the PXE filters which MACs to open or close, without ever failing the caller.

The broadcast only speeds the filters up: each filter's periodic full sync from the database
is the source of truth. So a failed broadcast is logged and forgotten, and with no message
bus at all (all-in-one mode) nothing is sent.
"""

import logging
from collections.abc import Iterable

from oslo_config import cfg

from inspection.common import filter_rpc, macs, messaging

LOG = logging.getLogger(__name__)


#: Reconnection attempts per broadcast: a dead message bus must not stall inspection.
DEFAULT_RETRY = 2


class FilterNotifier:
    """Sends ``update_pxe_filters`` broadcasts on ``transport``, or nothing if it is None."""

    def __init__(self, transport=None, retry: int = DEFAULT_RETRY) -> None:
        self.transport = transport
        self.retry = retry

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> "FilterNotifier":
        """A notifier on ``[DEFAULT]transport_url``, or a no-op one when it is unset."""
        url = messaging.configured_transport_url(conf)
        return cls(messaging.get_transport(url) if url else None)

    def allow(self, addresses: Iterable[str]) -> bool:
        """Open the filters for ``addresses``; True if a broadcast was sent."""
        return self.update(allow=addresses)

    def deny(self, addresses: Iterable[str]) -> bool:
        """Close the filters for ``addresses``; True if a broadcast was sent."""
        return self.update(deny=addresses)

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
            filter_rpc.broadcast(self.transport, allow=allow_list, deny=deny_list,
                                 retry=self.retry)
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
