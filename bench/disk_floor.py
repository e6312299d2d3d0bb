"""The file system's floor for a first sync: N files created, written and renamed, nothing else.

Each file is what the filter writes for a new MAC (a dotfile created, one line written, closed,
renamed over its final name), in a fresh directory on the disk under test, without the
database, the policy or the cache. Median of ``--repeat`` runs with the spread. Not a test.

    .venv/bin/python bench/disk_floor.py [--files 50000] [--dir /tmp] [--repeat 3]
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time


def one_run(files: int, parent: str, full: bool) -> float:
    """Seconds for ``files`` create + write + rename (``full``: also fchmod and fstat)."""
    path = tempfile.mkdtemp(prefix="disk-floor-", dir=parent)
    dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    line = b"52:54:00:00:00:00,ignore\n"
    names = [(f".{i:012x}.tmp", f"{i:012x}") for i in range(files)]
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.sync()
        start = time.perf_counter()
        for tmp, final in names:
            fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
            if full:
                os.fchmod(fd, 0o644)
            os.write(fd, line)
            if full:
                os.fstat(fd)
            os.close(fd)
            os.rename(tmp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return time.perf_counter() - start
    finally:
        os.close(dir_fd)
        shutil.rmtree(path)


def main() -> None:
    """Print the median and spread of both variants."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50000)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for full, label in ((False, "open+write+close+rename"),
                        (True, "the same + fchmod + fstat (what a sync does per file)")):
        times = [one_run(args.files, args.dir, full) for _ in range(args.repeat)]
        print(f"{args.files} files, {label}: median {statistics.median(times):.3f} s "
              f"({min(times):.3f}-{max(times):.3f}), load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
