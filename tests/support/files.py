"""Reading hostsdir files in tests, and waiting until one holds the expected decision."""

import shutil
import subprocess
import time
from pathlib import Path

from tests.support import services


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


def chattr(flag: str, path: Path) -> None:
    """Set or clear a file attribute (``+i``, ``-a``...); fails in CI where it cannot."""
    if shutil.which("chattr") is None:
        services.unavailable("chattr", "not installed (package e2fsprogs)")
        return
    proc = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        services.unavailable("chattr", proc.stderr.strip())
