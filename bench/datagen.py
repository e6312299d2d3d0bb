"""Create an Ironic database with Ironic's own schema and fill it with N ports.

Runs INSIDE the baseline venv (it needs Ironic's models): the schema is made by Ironic's
``ironic-dbsync create_schema``, so both filters read a database exactly as Ironic makes it.

    .venvs/ironic39/bin/python bench/datagen.py --db /tmp/x.sqlite --ports 50000
"""

import argparse
import datetime
import os
import random
import subprocess
import sys
import tempfile
import uuid

# Share of nodes per provision state; the rest are 'manageable'/'available'/'active'.
INSPECT_WAIT_SHARE = 0.02
# Nodes in 'inspect wait' with an inspect interface the filter does not support (denied).
UNSUPPORTED_SHARE = 0.005
PLAIN_STATES = ("manageable", "available", "active")
BATCH = 5000


def mac_for(index: int) -> str:
    """The deterministic lower-case colon MAC of port number ``index``."""
    raw = 0x525400000000 + index
    return ":".join(f"{(raw >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def create_schema(url: str) -> None:
    """Create the schema with Ironic's own dbsync command."""
    dbsync = os.path.join(os.path.dirname(sys.executable), "ironic-dbsync")
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as conf:
        conf.write(f"[database]\nconnection = {url}\n")
    try:
        proc = subprocess.run([dbsync, "--config-file", conf.name, "create_schema"],
                              capture_output=True, text=True, check=False)
    finally:
        os.unlink(conf.name)
    if proc.returncode != 0:
        sys.exit(f"ironic-dbsync create_schema failed:\n{proc.stderr}")


def node_rows(nodes: int, rng: random.Random, now: datetime.datetime):
    """Rows for the nodes table: ids 1..nodes, a seeded mix of states."""
    for node_id in range(1, nodes + 1):
        roll = rng.random()
        interface = "agent"
        if roll < INSPECT_WAIT_SHARE:
            state = "inspect wait"
        elif roll < INSPECT_WAIT_SHARE + UNSUPPORTED_SHARE:
            state, interface = "inspect wait", "redfish"
        else:
            state = PLAIN_STATES[node_id % len(PLAIN_STATES)]
        yield {
            "id": node_id,
            "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "name": f"node-{node_id}",
            "driver": "ipmi",
            "driver_info": {"ipmi_address": "192.0.2.1", "ipmi_username": "admin"},
            "properties": {"cpu_arch": "x86_64", "memory_mb": 65536},
            "extra": {},
            "instance_info": {},
            "driver_internal_info": {},
            "provision_state": state,
            "power_state": "power off",
            "inspect_interface": interface,
            "resource_class": "baremetal",
            "conductor_group": "",
            "version": "1.40",
            "created_at": now,
        }


def port_rows(ports: int, nodes: int, rng: random.Random, now: datetime.datetime):
    """Rows for the ports table: port i belongs to node (i % nodes) + 1."""
    for index in range(ports):
        yield {
            "id": index + 1,
            "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "address": mac_for(index),
            "node_id": index % nodes + 1,
            "pxe_enabled": True,
            "extra": {},
            "local_link_connection": {},
            "internal_info": {},
            "is_smartnic": False,
            "available_for_dynamic_portgroup": False,
            "version": "1.12",
            "created_at": now,
        }


def insert(engine, table, rows) -> None:
    """Insert ``rows`` in batches with SQLAlchemy core (Ironic's column types encode JSON)."""
    batch = []
    with engine.begin() as conn:
        for row in rows:
            batch.append(row)
            if len(batch) == BATCH:
                conn.execute(table.insert(), batch)
                batch = []
        if batch:
            conn.execute(table.insert(), batch)


def main() -> None:
    """Parse arguments, create the schema, fill it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="SQLite file to create (must not exist)")
    where.add_argument("--url", help="an empty server database (SQLAlchemy URL) instead")
    parser.add_argument("--ports", type=int, required=True)
    parser.add_argument("--ports-per-node", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    if args.db and os.path.exists(args.db):
        sys.exit(f"{args.db} exists; refusing to overwrite it")
    url = args.url or f"sqlite:///{os.path.abspath(args.db)}"
    create_schema(url)

    import sqlalchemy as sa  # noqa: PLC0415 - only after dbsync succeeded
    from ironic.db.sqlalchemy import models  # noqa: PLC0415

    engine = sa.create_engine(url)
    rng = random.Random(args.seed)
    now = datetime.datetime(2026, 1, 1)
    nodes = max(1, args.ports // args.ports_per_node)
    insert(engine, models.Node.__table__, node_rows(nodes, rng, now))
    insert(engine, models.Port.__table__, port_rows(args.ports, nodes, rng, now))
    with engine.connect() as conn:
        counts = conn.execute(sa.text(
            "SELECT provision_state, inspect_interface, count(*) FROM nodes "
            "GROUP BY provision_state, inspect_interface ORDER BY 1, 2")).all()
    engine.dispose()
    summary = ", ".join(f"{state}/{iface}: {count}" for state, iface, count in counts)
    print(f"{args.db or 'database'}: {args.ports} ports on {nodes} nodes ({summary})")


if __name__ == "__main__":
    main()
