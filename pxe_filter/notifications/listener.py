"""Consume Ironic's versioned notifications from RabbitMQ on a queue of this daemon's own.

oslo.messaging's notification listener would declare the pool's queue without an expiry:
a stopped daemon would leave a queue that grows for ever, and its exchange options cannot be
changed without breaking Ironic's own declarations. So this listener declares its queue with
kombu (which oslo.messaging's rabbit driver uses too): named after ``[DEFAULT]host``, bound to
the ``ironic`` exchange on ``<topic>.info`` and ``<topic>.error`` for every configured topic,
with ``x-expires`` (RabbitMQ deletes it once unused that long) and ``x-max-length`` (oldest
messages dropped first). Every daemon has its own queue, so each sees every notification and
no other consumer of the topic loses its copy. The connection is retried in the background:
while the broker is away, the periodic full sync keeps the files right.
"""

import logging
import threading
import urllib.parse
from collections.abc import Callable

import amqp.exceptions
import kombu
from oslo_config import cfg

from pxe_filter.common.messaging import oslo_messaging_module

LOG = logging.getLogger(__name__)

EXCHANGE = "ironic"
PRIORITIES = ("info", "error")
QUEUE_PREFIX = "ironic-pxe-filter."
#: Seconds between reconnection attempts while the broker does not answer.
RETRY_INTERVAL = 2.0
#: Messages in flight to this daemon, and how many are acknowledged at once.
PREFETCH = 1000
ACK_EVERY = 200


def kombu_urls(transport_url: str) -> list[str]:
    """oslo.messaging's ``rabbit://user:pass@h1:5672,user:pass@h2/vhost`` as kombu URLs."""
    om = oslo_messaging_module()
    parsed = om.TransportURL.parse(cfg.CONF, transport_url)
    if parsed.transport not in ("rabbit", "amqp", "kombu"):
        raise ValueError(f"notifications are read from RabbitMQ only, not {parsed.transport}://")
    vhost = urllib.parse.quote(parsed.virtual_host or "", safe="")
    urls = []
    for host in parsed.hosts or [None]:
        if host is None:
            urls.append(f"amqp://guest:guest@localhost:5672/{vhost}")
            continue
        auth = ""
        if host.username:
            auth = urllib.parse.quote(host.username, safe="")
            if host.password:
                auth += ":" + urllib.parse.quote(host.password, safe="")
            auth += "@"
        address = f"[{host.hostname}]" if ":" in (host.hostname or "") else host.hostname
        urls.append(f"amqp://{auth}{address}:{host.port or 5672}/{vhost}")
    return urls


class NotificationListener:
    """A thread consuming one queue and handing each decoded body to ``handle``."""

    def __init__(self, transport_url: str, host: str, topics: list[str],
                 handle: Callable[[object], None], *, expires: int, max_length: int) -> None:
        self.urls = kombu_urls(transport_url)
        self.queue_name = QUEUE_PREFIX + host
        self.topics = list(topics)
        self.handle = handle
        self.expires = expires
        self.max_length = max_length
        self.connected = threading.Event()
        self._passive_exchange = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unacked = None  # the last handled message, not acknowledged yet
        self._pending = 0

    def start(self) -> None:
        """Start consuming in the background (connecting, and reconnecting, as needed)."""
        self._thread = threading.Thread(target=self._run, name="ironic-notifications",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop consuming; the queue stays until it expires."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _queue(self) -> kombu.Queue:
        # Declared as oslo.messaging declares it by default; if Ironic's options made it
        # differ, it is only looked up (passive) so that Ironic's declaration is never upset.
        exchange = kombu.Exchange(EXCHANGE, type="topic", durable=False, auto_delete=False,
                                  passive=self._passive_exchange)
        bindings = [kombu.binding(exchange, routing_key=f"{topic}.{priority}")
                    for topic in self.topics for priority in PRIORITIES]
        return kombu.Queue(self.queue_name, bindings=bindings, durable=False,
                           auto_delete=False,
                           queue_arguments={"x-expires": self.expires * 1000,
                                            "x-max-length": self.max_length})

    def _connect(self) -> kombu.Connection:
        """A connection to the broker (not yet connected)."""
        return kombu.Connection(";".join(self.urls), connect_timeout=5, heartbeat=0)

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                with self._connect() as conn:
                    conn.ensure_connection(max_retries=1)
                    with conn.Consumer([self._queue()], on_message=self._on_message,
                                       prefetch_count=PREFETCH):
                        LOG.info("Listening for Ironic's notifications on queue %s (topics "
                                 "%s)", self.queue_name, ", ".join(self.topics))
                        failing = False
                        self.connected.set()
                        self._drain(conn)
            except amqp.exceptions.PreconditionFailed as exc:
                self.connected.clear()
                if "exchange" in str(exc) and not self._passive_exchange:
                    self._passive_exchange = True  # declared with other options: use it
                    continue
                LOG.error("Queue %s exists with other options (%s): delete it (rabbitmqctl "
                          "delete_queue %s) or restore the previous [pxe_filter] "
                          "notification_queue_* values", self.queue_name, exc, self.queue_name)
                self._stop.wait(30 * RETRY_INTERVAL)
            except Exception as exc:  # kombu and amqp raise many kinds on a lost broker
                self.connected.clear()
                if not failing:
                    LOG.warning("Ironic's notifications cannot be read (%s); retrying every "
                                "%.0f s, the periodic sync keeps the files right meanwhile",
                                exc, RETRY_INTERVAL)
                failing = True
                self._stop.wait(RETRY_INTERVAL)

    def _drain(self, conn: kombu.Connection) -> None:
        self._unacked = None
        while not self._stop.is_set():
            try:
                conn.drain_events(timeout=0.2 if self._unacked is not None else 1)
            except TimeoutError:
                self._ack()  # idle: acknowledge what was handled

    def _on_message(self, message) -> None:
        # The raw body: decoding is the parser's job, so a broken message is one log line.
        # Handled messages are acknowledged together (one frame per ACK_EVERY, not one
        # each): a flood is then read several times faster.
        try:
            self.handle(message.body)
        finally:
            self._unacked = message
            self._pending += 1
            if self._pending >= ACK_EVERY:
                self._ack()

    def _ack(self) -> None:
        if self._unacked is not None:
            self._unacked.ack(multiple=True)
        self._unacked, self._pending = None, 0
