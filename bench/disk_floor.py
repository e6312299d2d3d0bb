"""The file system's floor for a first sync: N files created and written, nothing else.

Each file is what the filter writes for a MAC, in a fresh directory on the disk under test,
without the database, the policy or the cache: a dotfile created, one line written, closed
and renamed over its final name (how an existing file is replaced), or the final name
created in place with ``O_EXCL`` (how a new file is written since issue 22). The variants
alternate within each repetition so a change of load hits them all. Median of ``--repeat``
runs with the spread. Not a test.

    .venv/bin/python bench/disk_floor.py [--files 50000] [--dir /tmp] [--repeat 3]
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time


def one_run(files: int, parent: str, variant: str) -> float:
    """Seconds for ``files`` new files written the way ``variant`` says (see VARIANTS)."""
    path = tempfile.mkdtemp(prefix="disk-floor-", dir=parent)
    dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    line = b"52:54:00:00:00:00,ignore\n"
    names = [(f".{i:012x}.tmp", f"{i:012x}") for i in range(files)]
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    create = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.sync()
        start = time.perf_counter()
        if variant == "create":
            for _tmp, final in names:
                fd = os.open(final, create, 0o644, dir_fd=dir_fd)
                os.fstat(fd)
                os.write(fd, line)
                os.close(fd)
            return time.perf_counter() - start
        full = variant == "full"
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


VARIANTS = {
    "rename": "open+write+close+rename",
    "full": "the same + fchmod + fstat (a new file before issue 22)",
    "create": "open(O_EXCL)+fstat+write+close in place (a new file now)",
}


def main() -> None:
    """Print the median and spread of each variant."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50000)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for turn in range(args.repeat):
        order = list(VARIANTS) if turn % 2 == 0 else list(reversed(VARIANTS))
        for variant in order:
            times[variant].append(one_run(args.files, args.dir, variant))
    for variant, label in VARIANTS.items():
        spent = times[variant]
        print(f"{args.files} files, {label}: median {statistics.median(spent):.3f} s "
              f"({min(spent):.3f}-{max(spent):.3f}), load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
