"""Ironic 39's own PXE filter sync, driven by the benchmark; runs INSIDE the baseline venv.

Calls ``PXEFilterManager._sync`` (one iteration of Ironic's periodic full-sync loop: load
nodes on inspection and every port through Ironic's DB API, then ``dnsmasq.sync``) on the
given database and hostsdir. Nothing of Ironic is copied; it is imported from the venv.

    .venvs/ironic39/bin/python bench/ironic_filter_baseline.py --db F --hostsdir D
"""

import argparse
import os
import sys

from worker_protocol import serve


def main() -> None:
    """Configure Ironic for the database and hostsdir, then serve sync commands."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="SQLite file made by datagen.py")
    where.add_argument("--url", help="a server database made by datagen.py --url")
    parser.add_argument("--hostsdir", required=True)
    args = parser.parse_args()

    from ironic.conf import CONF  # noqa: PLC0415 - only in the baseline venv
    from ironic.db import api as dbapi  # noqa: PLC0415
    from ironic.pxe_filter.service import PXEFilterManager  # noqa: PLC0415

    CONF([], project="ironic", default_config_files=[])
    CONF.set_override("connection", args.url or f"sqlite:///{os.path.abspath(args.db)}",
                      group="database")
    CONF.set_override("dhcp_hostsdir", os.path.abspath(args.hostsdir), group="pxe_filter")
    manager = PXEFilterManager("bench")
    manager.prepare_host()
    db = dbapi.get_instance()
    # _sync, not _try_sync: an exception must surface in the benchmark, not be logged away.
    serve(lambda: manager._sync(db))


if __name__ == "__main__":
    sys.exit(main())
