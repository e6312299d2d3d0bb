"""The ``update_pxe_filters`` RPC endpoint and server (fanout topic ``ironic.pxe_filter``).

Only the one method is callable (explicit access policy). oslo.messaging runs handlers in a
thread pool; :class:`pxe_filter.sync.FilterSync` serialises them with the periodic sync.
"""

import logging

from pxe_filter import broadcast
from pxe_filter.common import messaging as common_messaging
from pxe_filter.common.messaging import oslo_messaging_module
from pxe_filter.sync import FilterSync

messaging = oslo_messaging_module()

LOG = logging.getLogger(__name__)


class FilterEndpoint:
    """Applies broadcast allow/deny lists to the local hostsdir."""

    target = messaging.Target(version=broadcast.VERSION)

    def __init__(self, sync: FilterSync) -> None:
        self.sync = sync

    @messaging.expose
    def update_pxe_filters(self, context, allow=None, deny=None, **kwargs) -> None:
        """Serve the MACs in ``allow`` and refuse those in ``deny`` (deny wins)."""
        if kwargs:
            LOG.warning("Broadcast: ignoring unknown argument(s) %s",
                        ", ".join(sorted(kwargs)))
        try:
            self.sync.apply_broadcast(allow=allow, deny=deny)
        except Exception:
            # The next full sync repairs whatever this broadcast could not write.
            LOG.exception("Broadcast could not be applied; the next full sync will catch up")


def start_server(transport, host: str, sync: FilterSync):
    """Start consuming broadcasts for ``host``; returns the running server."""
    return common_messaging.start_rpc_server(transport, broadcast.target(server=host),
                                             [FilterEndpoint(sync)])


def stop_server(server) -> None:
    """Stop consuming and wait for in-flight handlers."""
    common_messaging.stop_rpc_server(server)
