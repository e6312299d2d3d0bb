"""waitress's per-request queue-depth warnings become one line per window."""

import logging

from waitress.task import ThreadedTaskDispatcher

from inspection.api import queue_log


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_of_queued_requests_logs_one_line_per_window(caplog):
    clock = Clock()
    summary = queue_log.QueueDepthSummary(threads=8, window=10.0, clock=clock)
    logger = logging.getLogger(queue_log.QUEUE_LOGGER)
    logger.addFilter(summary)
    # waitress itself, with no thread to run the tasks: every added task queues and warns
    dispatcher = ThreadedTaskDispatcher()
    try:
        with caplog.at_level(logging.WARNING, logger=queue_log.QUEUE_LOGGER):
            for _ in range(500):
                dispatcher.add_task(object())
            clock.now += 10.0
            for _ in range(3):
                dispatcher.add_task(object())
    finally:
        logger.removeFilter(summary)
    lines = [r.getMessage() for r in caplog.records if r.name == queue_log.QUEUE_LOGGER]
    assert len(lines) == 2, lines
    assert lines[0].startswith("1 request(s) waited for one of the 8 API threads")
    # the second line counts the 499 folded since the first plus itself, and the deepest queue
    assert lines[1].startswith("500 request(s) waited for one of the 8 API threads")
    assert "queue up to 501 deep" in lines[1]
    assert "raise [api]threads" in lines[1]


def test_install_replaces_the_previous_summary():
    logger = logging.getLogger(queue_log.QUEUE_LOGGER)
    first = queue_log.install(4)
    second = queue_log.install(8)
    try:
        assert first not in logger.filters
        assert [f for f in logger.filters if isinstance(f, queue_log.QueueDepthSummary)] \
            == [second]
    finally:
        logger.removeFilter(second)
