"""The ``update_pxe_filters`` RPC endpoint and server (fanout topic ``ironic.pxe_filter``).

Only the one method is callable (explicit access policy). oslo.messaging runs handlers in a
thread pool, in no particular order: a broadcast is only a hint
(:meth:`pxe_filter.sync.FilterSync.hint`), its denies written at once and everything else
decided by a read of the database, so the order does not matter.
"""

import logging
from collections.abc import Callable

from pxe_filter import broadcast
from pxe_filter.common import messaging as common_messaging
from pxe_filter.common.messaging import oslo_messaging_module
from pxe_filter.sync import FilterSync

messaging = oslo_messaging_module()

LOG = logging.getLogger(__name__)


class BroadcastListener:
    """Takes broadcast allow/deny lists as hints for the local hostsdir, consumed for ``host``
    on ``url`` once started (its own endpoint: only ``update_pxe_filters`` is exposed);
    ``after`` runs after each broadcast taken (the daemon counts it)."""

    target = messaging.Target(version=broadcast.VERSION)

    def __init__(self, url: str, host: str, sync: FilterSync,
                 after: Callable[[], None] = lambda: None) -> None:
        self.url, self.host, self.sync, self.after = url, host, sync, after
        self._server = None

    @messaging.expose
    def update_pxe_filters(self, context, allow=None, deny=None, **kwargs) -> None:
        """Refuse the MACs in ``deny`` now; look ``allow`` up in the database (deny wins)."""
        if kwargs:
            LOG.warning("Broadcast: ignoring unknown argument(s) %s",
                        ", ".join(sorted(kwargs)))
        try:
            self.sync.hint(allow=allow, deny=deny)
            self.after()
        except Exception:
            # The next full sync repairs whatever this broadcast could not write.
            LOG.exception("Broadcast could not be applied; the next full sync will catch up")

    def start(self) -> None:
        """Connect and consume; raises whatever the driver raises."""
        self._server = common_messaging.start_rpc_server(
            common_messaging.get_transport(self.url), broadcast.target(server=self.host),
            [self])

    def stop(self) -> None:
        """Stop consuming and wait for in-flight broadcasts; never raises."""
        if self._server is not None:
            try:
                self._server.stop()
                self._server.wait()
            except Exception as exc:
                LOG.warning("Stopping the broadcast listener: %s", exc)
            self._server = None
