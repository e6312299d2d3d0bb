"""One log line for each rejected ramdisk callback: the client address, the status and the
reason, so that a ramdisk sending malformed data is seen in the log and not only in a metric.

Lines are rate-limited per client address (a burst, then one per interval); the next line of
an address counts the rejections that were not logged meanwhile, so a flood cannot fill the
log and nothing goes unnoticed. 503s are left out: the API summarises those itself.
"""

import json
import logging
import threading
import time

from flask import Flask, Response, request
from oslo_config import cfg

from inspection.api.addresses import client_address, proxy_headers_parsed
from inspection.api.ratelimit import CALLBACK_ENDPOINT, TokenBuckets, client_key
from inspection.common.untrusted import for_log

LOG = logging.getLogger("inspection.api.continue")

#: Lines an address may log at once, then one every INTERVAL seconds.
BURST, INTERVAL = 5, 10.0
#: Addresses whose unlogged rejections are counted at most (the counts are then reset).
MAX_COUNTED = 65536


class RejectionLog:
    """Logs rejected callbacks, at most ``burst`` lines per address then one per
    ``interval`` seconds; thread-safe."""

    def __init__(self, burst: int = BURST, interval: float = INTERVAL,
                 clock=time.monotonic) -> None:
        self.buckets = TokenBuckets(1 / interval, burst, clock=clock)
        self._unlogged: dict[str, int] = {}
        self._lock = threading.Lock()

    def rejected(self, address: str, status: int, reason: str) -> None:
        """Log (or count) one callback from ``address`` answered with ``status``."""
        key = client_key(address)
        with self._lock:
            if self.buckets.take(key):
                if len(self._unlogged) >= MAX_COUNTED:
                    self._unlogged.clear()
                self._unlogged[key] = self._unlogged.get(key, 0) + 1
                return
            unlogged = self._unlogged.pop(key, 0)
        more = (f" ({unlogged} more rejected from {key} since the last such line)"
                if unlogged else "")
        LOG.warning("Ramdisk callback from %s rejected with %d: %s%s. Check the ramdisk's "
                    "version and what it sends (docs/troubleshooting.md)",
                    for_log(address, 100), status, for_log(reason, 300), more)


#: The log of the API process (waitress's own rejections are logged through it too).
DEFAULT = RejectionLog()


def reason_of(response: Response) -> str:
    """The ``faultstring`` of an error in Ironic's body, else the status text."""
    try:
        body = json.loads(response.get_data(as_text=True))
        return json.loads(body["error_message"])["faultstring"]
    except (ValueError, KeyError, TypeError):
        return response.status


def install(app: Flask, conf: cfg.ConfigOpts, log: RejectionLog | None = None) -> RejectionLog:
    """Log every callback answered with a 4xx."""
    log = log or DEFAULT
    behind_proxy = proxy_headers_parsed(conf)

    @app.after_request
    def log_rejection(response: Response) -> Response:
        if request.endpoint == CALLBACK_ENDPOINT and 400 <= response.status_code < 500:
            log.rejected(client_address(behind_proxy), response.status_code,
                         reason_of(response))
        return response

    return log
