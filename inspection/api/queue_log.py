"""waitress warns once per request that has to wait for a thread: in a burst of 1,000
callbacks that is nearly 1,000 lines saying the same thing. :class:`QueueDepthSummary` lets
one line through per window and folds the rest into it, with what to do about it."""

import logging
import threading
import time

#: waitress's logger for "Task queue depth is N".
QUEUE_LOGGER = "waitress.queue"


class QueueDepthSummary(logging.Filter):
    """Passes the first queue-depth warning of every ``window`` seconds, rewritten to say how
    many requests waited since the last line, the deepest queue, and the remedy."""

    def __init__(self, threads: int, window: float = 10.0,
                 clock=time.monotonic) -> None:
        super().__init__()
        self.threads, self.window, self.clock = threads, window, clock
        self._lock = threading.Lock()
        self._next = 0.0
        self._waited = 0
        self._deepest = 0

    def filter(self, record: logging.LogRecord) -> bool:
        """True for the one record of the window that is logged (rewritten), else False."""
        depth = record.args[0] if isinstance(record.args, tuple) and record.args else 0
        with self._lock:
            self._waited += 1
            self._deepest = max(self._deepest, depth if isinstance(depth, int) else 0)
            now = self.clock()
            if now < self._next:
                return False
            waited, deepest = self._waited, self._deepest
            self._waited = self._deepest = 0
            self._next = now + self.window
        record.msg = ("%d request(s) waited for one of the %d API threads since the last such "
                      "line (queue up to %d deep); if this lasts, raise [api]threads or run "
                      "more API processes behind a balancer")
        record.args = (waited, self.threads, deepest)
        return True


def install(threads: int) -> QueueDepthSummary:
    """Summarise waitress's queue-depth warnings from now on (replaces an earlier filter)."""
    logger = logging.getLogger(QUEUE_LOGGER)
    for old in [f for f in logger.filters if isinstance(f, QueueDepthSummary)]:
        logger.removeFilter(old)
    summary = QueueDepthSummary(threads)
    logger.addFilter(summary)
    return summary
