"""The PXE filter broadcast protocol, shared by senders and the ironic-pxe-filter daemon.

Conductors (or this inspection service) announce MACs to open or close with a fanout cast;
every filter daemon applies it within milliseconds. A cast sent while a daemon is down is
lost, which is fine: each daemon's periodic full sync from the database stays the source of
truth.
"""

import logging
from collections.abc import Iterable

from inspection.common import macs
from inspection.common.messaging import oslo_messaging_module

EXCHANGE = "ironic"
TOPIC = "ironic.pxe_filter"
VERSION = "1.0"
METHOD = "update_pxe_filters"

LOG = logging.getLogger(__name__)


def target(server: str | None = None, fanout: bool = False):
    """The oslo.messaging target of the broadcast (server side: pass ``server``)."""
    messaging = oslo_messaging_module()
    return messaging.Target(exchange=EXCHANGE, topic=TOPIC, version=VERSION, server=server,
                            fanout=fanout)


def broadcast(transport, allow: Iterable[str] = (), deny: Iterable[str] = (),
              retry: int | None = None) -> None:
    """Fanout-cast ``update_pxe_filters`` to every filter daemon on ``transport``.

    MACs are validated and normalised here too, so a sender bug is reported at its source;
    raises :class:`inspection.common.macs.InvalidMAC` for the first invalid MAC. ``retry``
    bounds reconnection attempts (oslo.messaging: None retries forever, 0 never).
    """
    allow_list = [macs.normalize_mac(m) for m in allow]
    deny_list = [macs.normalize_mac(m) for m in deny]
    if not allow_list and not deny_list:
        return
    messaging = oslo_messaging_module()
    client = messaging.get_rpc_client(transport, target(fanout=True), retry=retry)
    client.cast({}, METHOD, allow=allow_list, deny=deny_list)
    LOG.debug("Broadcast %s: allow %d MAC(s), deny %d MAC(s)", METHOD, len(allow_list),
              len(deny_list))
