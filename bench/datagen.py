"""Create an Ironic database with Ironic's own schema and fill it with N ports.

Runs INSIDE the baseline venv (it needs Ironic's models): the schema is made by Ironic's
``ironic-dbsync create_schema``, so both filters read a database exactly as Ironic makes it.

    .venvs/ironic39/bin/python bench/datagen.py --db /tmp/x.sqlite --ports 50000

SQLite files are filled through the driver's ``executemany`` (1M ports in seconds, not
a minute); a server database (``--url``) through SQLAlchemy Core.
"""

import argparse
import datetime
import os
import random
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterable, Iterator

# Share of nodes per provision state; the rest are 'manageable'/'available'/'active'.
INSPECT_WAIT_SHARE = 0.02
# Nodes in 'inspect wait' with an inspect interface the filter does not support (denied).
UNSUPPORTED_SHARE = 0.005
PLAIN_STATES = ("manageable", "available", "active")
BATCH = 5000
NOW = datetime.datetime(2026, 1, 1)


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


#: Columns whose value is the same in every row (encoded once by Ironic's column types).
NODE_CONSTANTS = {
    "driver": "ipmi",
    "driver_info": {"ipmi_address": "192.0.2.1", "ipmi_username": "admin"},
    "properties": {"cpu_arch": "x86_64", "memory_mb": 65536},
    "extra": {},
    "instance_info": {},
    "driver_internal_info": {},
    "power_state": "power off",
    "resource_class": "baremetal",
    "version": "1.40",
    "created_at": NOW,
    # Ironic's model defaults, spelled out: the bulk path bypasses SQLAlchemy's defaults.
    "maintenance": False,
    "console_enabled": False,
    "protected": False,
    "retired": False,
    "disable_power_off": False,
}
NODE_COLUMNS = ("id", "uuid", "name", "provision_state", "inspect_interface",
                "conductor_group")
PORT_CONSTANTS = {
    "pxe_enabled": True,
    "extra": {},
    "local_link_connection": {},
    "internal_info": {},
    "is_smartnic": False,
    "available_for_dynamic_portgroup": False,
    "version": "1.12",
    "created_at": NOW,
}
PORT_COLUMNS = ("id", "uuid", "address", "node_id")


def node_rows(nodes: int, rng: random.Random, groups: int = 0) -> Iterator[tuple]:
    """Varying columns (NODE_COLUMNS) of nodes 1..nodes: a seeded mix of states, and
    node i in conductor group ``group-{i % groups}`` when ``groups`` (else Ironic's "")."""
    for node_id in range(1, nodes + 1):
        roll = rng.random()
        interface = "agent"
        if roll < INSPECT_WAIT_SHARE:
            state = "inspect wait"
        elif roll < INSPECT_WAIT_SHARE + UNSUPPORTED_SHARE:
            state, interface = "inspect wait", "redfish"
        else:
            state = PLAIN_STATES[node_id % len(PLAIN_STATES)]
        yield (node_id, str(uuid.UUID(int=rng.getrandbits(128), version=4)),
               f"node-{node_id}", state, interface,
               f"group-{node_id % groups}" if groups else "")


def port_rows(ports: int, nodes: int, rng: random.Random) -> Iterator[tuple]:
    """Varying columns (PORT_COLUMNS) of the ports: port i belongs to node (i % nodes) + 1."""
    for index in range(ports):
        yield (index + 1, str(uuid.UUID(int=rng.getrandbits(128), version=4)),
               mac_for(index), index % nodes + 1)


def insert(engine, table, columns: tuple[str, ...], constants: dict,
           rows: Iterable[tuple]) -> None:
    """Insert ``rows`` in batches with SQLAlchemy Core (Ironic's column types encode JSON);
    for a server database given by ``--url``."""
    batch = []
    with engine.begin() as conn:
        for row in rows:
            batch.append({**constants, **dict(zip(columns, row, strict=True))})
            if len(batch) == BATCH:
                conn.execute(table.insert(), batch)
                batch = []
        if batch:
            conn.execute(table.insert(), batch)


def bulk_insert(engine, table, columns: tuple[str, ...], constants: dict,
                rows: Iterable[tuple]) -> None:
    """The same rows through the driver's ``executemany`` (SQLite): the constant columns
    are encoded once by Ironic's own column types, the varying ones need no encoding.

    Per-row dicts and bind processing made 1M ports take ~50 s; this takes a fraction.
    """
    dialect = engine.dialect
    for name in columns:  # ints and plain strings: stored as given
        if table.c[name].type._cached_bind_processor(dialect) is not None:
            raise ValueError(f"{table.name}.{name} needs encoding; make it a constant")
    encoded = {}
    for name, value in constants.items():
        process = table.c[name].type._cached_bind_processor(dialect)
        encoded[name] = process(value) if process is not None else value
    names = (*columns, *encoded)
    statement = (f"INSERT INTO {table.name} ({', '.join(names)}) "
                 f"VALUES ({', '.join('?' * len(names))})")
    tail = tuple(encoded.values())
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("PRAGMA synchronous = OFF")  # a throw-away benchmark file
        cursor.executemany(statement, (row + tail for row in rows))
        raw.commit()
    finally:
        raw.close()


def main() -> None:
    """Parse arguments, create the schema, fill it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="SQLite file to create (must not exist)")
    where.add_argument("--url", help="an empty server database (SQLAlchemy URL) instead")
    parser.add_argument("--ports", type=int, required=True)
    parser.add_argument("--ports-per-node", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--groups", type=int, default=0,
                        help="spread nodes over N conductor groups group-0..group-N-1 "
                             "(default: none, Ironic's empty group)")
    args = parser.parse_args()
    if args.db and os.path.exists(args.db):
        sys.exit(f"{args.db} exists; refusing to overwrite it")
    url = args.url or f"sqlite:///{os.path.abspath(args.db)}"
    create_schema(url)

    import sqlalchemy as sa  # noqa: PLC0415 - only after dbsync succeeded
    from ironic.db.sqlalchemy import models  # noqa: PLC0415

    engine = sa.create_engine(url)
    rng = random.Random(args.seed)
    nodes = max(1, args.ports // args.ports_per_node)
    fill = bulk_insert if engine.dialect.name == "sqlite" else insert
    fill(engine, models.Node.__table__, NODE_COLUMNS, NODE_CONSTANTS,
         node_rows(nodes, rng, args.groups))
    fill(engine, models.Port.__table__, PORT_COLUMNS, PORT_CONSTANTS,
         port_rows(args.ports, nodes, rng))
    with engine.connect() as conn:
        counts = conn.execute(sa.text(
            "SELECT provision_state, inspect_interface, count(*) FROM nodes "
            "GROUP BY provision_state, inspect_interface ORDER BY 1, 2")).all()
    engine.dispose()
    summary = ", ".join(f"{state}/{iface}: {count}" for state, iface, count in counts)
    print(f"{args.db or 'database'}: {args.ports} ports on {nodes} nodes ({summary})")


if __name__ == "__main__":
    main()
