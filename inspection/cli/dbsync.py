"""``ironic-inspection dbsync``: create or upgrade the database schema."""

import argparse

from oslo_config import cfg

from inspection import conf as inspection_conf
from inspection.db import migration
from pxe_filter.common import config, logs
from pxe_filter.common.database import describe_url, engine_from_conf


def add_commands(sub, parent: argparse.ArgumentParser) -> None:
    """Register the dbsync sub-command."""
    parser = sub.add_parser(
        "dbsync", parents=[parent],
        help="create or upgrade the database schema",
        description="Create the schema in an empty database, or upgrade it to this version. "
                    "Refuses databases created by Ironic (their schema belongs to "
                    "ironic-dbsync); the services read those as they are.")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run dbsync with the configuration named in ``args``."""
    conf = cfg.ConfigOpts()
    logs.register_options(conf, "ironic-inspection")
    inspection_conf.register_opts(conf)
    config.load(conf, args.config_file, args.config_dir, config.INSPECTION_DEFAULTS)
    logs.setup(conf, "ironic-inspection")
    # A schema upgrade of a large table may take longer than any one request should.
    conf.set_override("statement_timeout", 0, group="database")
    engine = engine_from_conf(conf, create=True)
    try:
        before, after = migration.upgrade(engine)
    finally:
        engine.dispose()
    where = describe_url(engine.url)
    if before == after:
        print(f"Database {where} is already at revision {after}.")
    elif before is None:
        print(f"Created schema revision {after} in {where}.")
    else:
        print(f"Upgraded {where} from revision {before} to {after}.")
    return 0
