"""Add two demo nodes (one on inspection, one not) to the demo database if they are missing."""

import argparse
import uuid

from oslo_config import cfg
from sqlalchemy import select
from sqlalchemy.orm import sessionmaker

from inspection import conf as inspection_conf
from inspection.db import models
from inspection.db.engine import session_scope
from pxe_filter.common import config
from pxe_filter.common.database import engine_from_conf

DEMO = [
    ("demo-inspecting", models.INSPECT_WAIT, "52:54:00:00:00:01"),
    ("demo-manageable", models.MANAGEABLE, "52:54:00:00:00:02"),
]


def main() -> None:
    """Insert the demo nodes and print what the filter should do with them."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config-file", action="append", default=[])
    args = parser.parse_args()
    conf = cfg.ConfigOpts()
    inspection_conf.register_opts(conf)
    config.load(conf, args.config_file)
    engine = engine_from_conf(conf)
    with session_scope(sessionmaker(engine)) as session:
        for name, state, mac in DEMO:
            if session.scalar(select(models.Node.id).where(models.Node.name == name)):
                continue
            node = models.Node(uuid=str(uuid.uuid4()), name=name, driver="fake-hardware",
                               provision_state=state, inspect_interface="agent")
            session.add(node)
            session.flush()
            session.add(models.Port(uuid=str(uuid.uuid4()), address=mac, node_id=node.id))
    for name, state, mac in DEMO:
        verdict = "allowed" if state in models.INSPECTION_STATES else "denied"
        print(f"demo node {name} ({state}) port {mac}: expect {verdict}")


if __name__ == "__main__":
    main()
