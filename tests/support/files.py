"""Reading hostsdir files in tests, and waiting until one holds the expected decision."""

import time
from pathlib import Path


def read(path: Path) -> str | None:
    """The file's content, None if it is missing (or a directory squats its name)."""
    try:
        return path.read_text()
    except (FileNotFoundError, IsADirectoryError):
        return None


def time_until(path: Path, expected: str, timeout: float = 5.0, poll: float = 0.0005) -> float:
    """Seconds until ``path`` holds ``expected``; fails the test after ``timeout``."""
    start = time.perf_counter()
    while read(path) != expected:
        assert time.perf_counter() - start < timeout, f"{path.name}: {read(path)!r}"
        time.sleep(poll)
    return time.perf_counter() - start
