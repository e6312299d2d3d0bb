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

The connection honours oslo.messaging's RabbitMQ options as its own driver reads them
(``[oslo_messaging_rabbit] ssl, ssl_ca_file, ssl_cert_file, ssl_key_file, ssl_version,
heartbeat_timeout_threshold, heartbeat_rate, kombu_failover_strategy, rabbit_login_method``,
each overridable in the URL's query, e.g. ``?ssl=1``), so one configuration serves Ironic, the
RPC listener and this consumer alike.
"""

import logging
import ssl
import threading
import urllib.parse
from collections.abc import Callable

import amqp.exceptions
import kombu
import kombu.exceptions
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


#: oslo.messaging's names of ``[oslo_messaging_rabbit]ssl_version`` values.
_SSL_VERSIONS = {"tlsv1": "PROTOCOL_TLSv1", "tlsv1_1": "PROTOCOL_TLSv1_1",
                 "tlsv1_2": "PROTOCOL_TLSv1_2", "sslv23": "PROTOCOL_SSLv23"}
#: ``ssl`` arguments taken as they are from ``[oslo_messaging_rabbit]`` options.
_TLS_FILES = (("keyfile", "ssl_key_file"), ("certfile", "ssl_cert_file"),
              ("ca_certs", "ssl_ca_file"))


def _kombu_urls(om, parsed) -> list[str]:
    """oslo.messaging's ``rabbit://user:pass@h1:5672,user:pass@h2/vhost`` as kombu URLs."""
    vhost = urllib.parse.quote(parsed.virtual_host or "", safe="")
    urls = []
    for host in parsed.hosts or [om.TransportHost("localhost", None, "guest", "guest")]:
        auth = urllib.parse.quote(host.username or "", safe="")
        if auth and host.password:
            auth += ":" + urllib.parse.quote(host.password, safe="")
        address = f"[{host.hostname}]" if ":" in (host.hostname or "") else host.hostname
        urls.append(f"amqp://{auth + '@' if auth else ''}{address}:{host.port or 5672}/{vhost}")
    return urls


def _rabbit_options(conf: cfg.ConfigOpts, query: dict[str, str]) -> dict:
    """``[oslo_messaging_rabbit]`` values, those named in the URL's query taking precedence
    (as oslo.messaging's driver reads them); ValueError for a bad query value."""
    from oslo_messaging import opts as om_opts  # noqa: PLC0415 - after backend selection

    opts = {opt.dest: opt for group, group_opts in om_opts.list_opts()
            if group == "oslo_messaging_rabbit" for opt in group_opts}
    conf.register_opts(list(opts.values()), group="oslo_messaging_rabbit")
    values = {}
    for name, opt in opts.items():
        values[name] = getattr(conf.oslo_messaging_rabbit, name)
        if name in query:
            try:
                values[name] = opt.type(query[name])
            except ValueError:
                raise ValueError(f"transport URL option {name}={query[name]!r} is not "
                                 f"valid") from None
    return values


def broker_connection(transport_url: str) -> tuple[kombu.Connection, dict]:
    """A kombu connection to the broker(s) of ``transport_url`` (failover between several
    hosts) built as oslo.messaging builds its own, and the options it was built from;
    ValueError for what cannot work."""
    om = oslo_messaging_module()
    parsed = om.TransportURL.parse(cfg.CONF, transport_url)
    if parsed.transport not in ("rabbit", "amqp", "kombu"):
        raise ValueError(f"notifications are read from RabbitMQ only, not {parsed.transport}://")
    options = _rabbit_options(cfg.CONF, dict(parsed.query or {}))
    tls: dict | bool = False
    if options["ssl"]:
        tls = {key: options[name] for key, name in _TLS_FILES if options[name]}
        if options["ssl_version"]:
            name = _SSL_VERSIONS.get(options["ssl_version"].lower(), "")
            if not hasattr(ssl, name):
                raise ValueError(f"[oslo_messaging_rabbit]ssl_version "
                                 f"{options['ssl_version']!r} is not available here")
            tls["ssl_version"] = getattr(ssl, name)
        if options["ssl_ca_file"]:
            tls["cert_reqs"] = ssl.CERT_REQUIRED
            # As oslo.messaging: the name is checked when there is one broker to name.
            if len(parsed.hosts) == 1:
                tls["server_hostname"] = parsed.hosts[0].hostname
        tls = tls or True
    connection = kombu.Connection(
        ";".join(_kombu_urls(om, parsed)), ssl=tls, connect_timeout=5,
        heartbeat=max(0, options["heartbeat_timeout_threshold"]),
        login_method=options["rabbit_login_method"],
        failover_strategy=options["kombu_failover_strategy"])
    return connection, options


def describe_failure(exc: BaseException, tls: bool) -> str:
    """What went wrong connecting, with the likely fix when TLS is on one side only."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, kombu.exceptions.OperationalError):  # kombu's wrapper of the cause
        exc = exc.__cause__ or exc.__context__ or exc
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"{text}: the broker's certificate is not trusted; set "
                f"[oslo_messaging_rabbit]ssl_ca_file to the CA that signed it")
    if tls and isinstance(exc, ssl.SSLError):
        return (f"{text}: TLS is on but the broker did not answer with TLS; is it a "
                f"clear-text port? Use the broker's TLS port (usually 5671)")
    # A TLS-only listener drops a clear AMQP greeting: reset, or closed before any answer.
    if not tls and (isinstance(exc, (ConnectionResetError, ConnectionAbortedError))
                    or "unexpectedly closed" in str(exc)):
        return (f"{text}: if the broker accepts only TLS, set [oslo_messaging_rabbit]ssl = "
                f"true (or add ?ssl=1 to the transport URL) and ssl_ca_file")
    return text


class NotificationListener:
    """A thread consuming one queue and handing each decoded body to ``handle``."""

    def __init__(self, transport_url: str, host: str, topics: list[str],
                 handle: Callable[[object], None], *, expires: int, max_length: int) -> None:
        self.transport_url = transport_url
        self.queue_name = QUEUE_PREFIX + host
        self.topics = list(topics)
        self.handle = handle
        self.expires = expires
        self.max_length = max_length
        self._passive_exchange = False
        self._failing = False  # said so: further failures are quiet until connected again
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
            # Bounded: a slow or frozen broker may never answer the last acks and the
            # cancel; unacknowledged notifications are delivered again, and applying one
            # twice changes nothing. The thread is a daemon: it does not hold the exit.
            self._thread.join(2)

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

    def _run(self) -> None:
        tls = False
        while not self._stop.is_set():
            wait = RETRY_INTERVAL
            try:
                connection, options = broker_connection(self.transport_url)
                tls = bool(options["ssl"])
                try:
                    self._consume(connection, options["heartbeat_rate"])
                except BaseException:
                    # No clean close: a lost or frozen broker would never answer it.
                    connection.collect()
                    raise
                connection.release()
            except amqp.exceptions.PreconditionFailed as exc:
                if "exchange" in str(exc) and not self._passive_exchange:
                    self._passive_exchange = True  # declared with other options: use it
                    continue
                LOG.error("Queue %s exists with other options (%s): delete it (rabbitmqctl "
                          "delete_queue %s) or restore the previous [pxe_filter] "
                          "notification_queue_* values", self.queue_name, exc, self.queue_name)
                wait = 30 * RETRY_INTERVAL
            except Exception as exc:  # kombu and amqp raise many kinds on a lost broker
                # (the options cannot fail here: the daemon refused any that cannot work at
                # start, and none of them is re-read on SIGHUP)
                if not self._failing:
                    LOG.warning("Ironic's notifications cannot be read (%s); retrying every "
                                "%.0f s, the periodic sync keeps the files right meanwhile",
                                describe_failure(exc, tls), RETRY_INTERVAL)
                self._failing = True
            self._stop.wait(wait)

    def _consume(self, conn: kombu.Connection, heartbeat_rate: int) -> None:
        conn.ensure_connection(max_retries=1)
        consumer = conn.Consumer([self._queue()], on_message=self._on_message,
                                 prefetch_count=PREFETCH)
        consumer.consume()
        LOG.info("Listening for Ironic's notifications on queue %s (topics %s)",
                 self.queue_name, ", ".join(self.topics))
        self._failing = False  # connected: a later failure is a new one
        # heartbeat_check sends ours when due and raises once the broker's are missed, so a
        # dead broker (or a silent network) is noticed within the heartbeat timeout.
        self._unacked = None
        while not self._stop.is_set():
            try:
                conn.drain_events(timeout=0.2 if self._unacked is not None else 1)
            except TimeoutError:
                self._ack()  # idle: acknowledge what was handled
            if conn.heartbeat:
                conn.heartbeat_check(rate=max(1, heartbeat_rate))
        self._ack()  # stopping: the broker is there to answer
        consumer.cancel()

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
