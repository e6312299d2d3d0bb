"""Rows one full sync reads, for an unscoped filter and for a scoped one in both modes.

Counts the rows each of the sync's two queries returns (``pxe_filter.source``'s own
statements, wrapped in ``SELECT count(*)``) on a database made by ``datagen.py --groups N``,
and prints the database's plan for each, which says whether the ports table is scanned or
reached through an index. Not a test: nothing is asserted.

    .venv/bin/python bench/rows_read.py sqlite:////tmp/scale/db-1000000.sqlite \\
        --conductor-group group-3 [--output bench/results/rows_scoped.json]
"""

import argparse
import json
import os
import sys

import sqlalchemy as sa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pxe_filter import policy
from pxe_filter.source import snapshot_queries


def count(conn: sa.Connection, query: sa.Select) -> int:
    """Rows ``query`` returns."""
    return conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()


def plan(conn: sa.Connection, query: sa.Select) -> list[str]:
    """The database's plan for ``query`` (SQLite and PostgreSQL)."""
    sql = str(query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    prefix = "EXPLAIN QUERY PLAN " if conn.dialect.name == "sqlite" else "EXPLAIN "
    return [" ".join(str(col) for col in row) for row in conn.exec_driver_sql(prefix + sql)]


def main() -> None:
    """Count and explain the sync's queries for each scope."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="SQLAlchemy URL of a datagen database")
    parser.add_argument("--conductor-group", default="group-3")
    parser.add_argument("--output")
    args = parser.parse_args()
    engine = sa.create_engine(args.url)
    scopes = {
        "unscoped": policy.UNSCOPED,
        "scoped, out_of_scope = deny": policy.Scope.from_options(
            [args.conductor_group], [], policy.OUT_OF_SCOPE_DENY),
        "scoped, out_of_scope = wildcard": policy.Scope.from_options(
            [args.conductor_group], [], policy.OUT_OF_SCOPE_WILDCARD),
    }
    results = {}
    with engine.connect() as conn:
        for name, scope in scopes.items():
            nodes_query, ports_query = snapshot_queries(scope)
            nodes, ports = count(conn, nodes_query), count(conn, ports_query)
            results[name] = {"node_rows": nodes, "port_rows": ports, "total": nodes + ports,
                             "ports_plan": plan(conn, ports_query)}
            print(f"{name:<33} nodes {nodes:>8,}  ports {ports:>9,}  total {nodes + ports:>9,}")
            for line in results[name]["ports_plan"]:
                print(f"    {line}")
    if args.output:
        with open(args.output, "w") as stream:
            json.dump(results, stream, indent=1)


if __name__ == "__main__":
    main()
