"""Rejected ramdisk callbacks: one line each, a burst per address, then one per interval that
counts the ones left out."""

import logging

from inspection.api.rejections import LOG, RejectionLog


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _logged(run) -> list[str]:
    lines = _Lines()
    LOG.addHandler(lines)
    try:
        run()
    finally:
        LOG.removeHandler(lines)
    return lines.lines


def test_a_flood_is_limited_per_address_and_counted():
    clock = _Clock()
    log = RejectionLog(burst=2, interval=10.0, clock=clock)

    def flood():
        for _ in range(50):
            log.rejected("192.0.2.7", 400, "The request body is not valid JSON")
        log.rejected("192.0.2.8", 400, "bad\nline")  # another address has its own budget
        clock.now += 10
        log.rejected("192.0.2.7", 413, "The request body is too large")

    lines = _logged(flood)
    assert lines[:2] == ["Ramdisk callback from 192.0.2.7 rejected with 400: The request body "
                         "is not valid JSON. Check the ramdisk's version and what it sends "
                         "(docs/troubleshooting.md)"] * 2
    # A newline from outside cannot start a forged log line.
    assert lines[2].startswith("Ramdisk callback from 192.0.2.8 rejected with 400: bad\\nline.")
    assert lines[3] == ("Ramdisk callback from 192.0.2.7 rejected with 413: The request body "
                        "is too large (48 more rejected from 192.0.2.7 since the last such "
                        "line). Check the ramdisk's version and what it sends "
                        "(docs/troubleshooting.md)")
    assert len(lines) == 4
