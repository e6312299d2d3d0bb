"""Our filter's full sync (``pxe_filter.sync.FilterSync``), driven by the benchmark.

Runs in the project venv; same protocol as ironic_filter_baseline.py, same database.

    .venv/bin/python bench/our_filter_worker.py --db F --hostsdir D
"""

import argparse
import os
import sys

from worker_protocol import serve


def main() -> None:
    """Build the engine and FilterSync exactly as the daemon does, then serve sync commands."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLite file made by datagen.py")
    parser.add_argument("--hostsdir", required=True)
    args = parser.parse_args()

    from pxe_filter.common.database import create_engine  # noqa: PLC0415
    from pxe_filter.source import DatabaseSource  # noqa: PLC0415
    from pxe_filter.sync import FilterSync  # noqa: PLC0415

    engine = create_engine(f"sqlite:///{os.path.abspath(args.db)}")
    sync = FilterSync(DatabaseSource(engine), os.path.abspath(args.hostsdir))
    serve(sync.full_sync)


if __name__ == "__main__":
    sys.exit(main())
