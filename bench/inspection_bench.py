"""Benchmark: inspection lookup among N waiting nodes, and full processing of one inventory.

Our side runs here (project venv) on a database made by our migrations; Ironic 39's side runs
in a subprocess of the baseline venv (this same file with ``--ironic-worker``) on a database
made by Ironic's own ``ironic-dbsync create_schema``. Both get the same nodes: N nodes in
``inspect wait``, 2 ports each, one BMC address each cached in
``driver_internal_info['lookup_bmc_addresses']``. Full processing of one callback body (the
Dell fixture) with the default hooks and the same 50 stored rules: ours in ``ours()``, Ironic's
conductor path in ``bench/ironic_processing_baseline.py`` (baseline venv, same database as
Ironic's lookup). Nothing of Ironic is copied: it is imported from its venv. Not a test:
nothing here asserts a timing.

    .venv/bin/python bench/inspection_bench.py [--nodes 10000] [--repeat 200]
        [--rules 50] [--baseline-python .venvs/ironic39/bin/python] [--output F.json]
"""

import argparse
import json
import logging
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "inventories", "uefi-dell-r640.json")
BATCH = 2000


# --- the shared data set (both sides call these) ---

def mac_for(index: int) -> str:
    """Lower-case colon MAC of port ``index``."""
    raw = 0x525400000000 + index
    return ":".join(f"{(raw >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def bmc_for(node: int) -> str:
    """The BMC address of node ``node`` (unique per node)."""
    return f"10.{node >> 16 & 255}.{node >> 8 & 255}.{node & 255}"


def uuid_for(node: int) -> str:
    """The UUID of node ``node``."""
    return str(uuid.UUID(int=node + 1, version=4))


def node_rows(nodes: int, extra: dict | None = None):
    """Rows for ``nodes``: all in inspect wait with one cached BMC address each."""
    for i in range(nodes):
        yield {"id": i + 1, "uuid": uuid_for(i), "name": f"node-{i}", "driver": "ipmi",
               "driver_info": {"ipmi_address": bmc_for(i), "ipmi_username": "admin"},
               "driver_internal_info": {"lookup_bmc_addresses": [bmc_for(i)]},
               "properties": {}, "extra": {}, "instance_info": {},
               "provision_state": "inspect wait", "target_provision_state": "manageable",
               "inspect_interface": "agent", "conductor_group": "", **(extra or {})}


def port_rows(nodes: int, extra: dict | None = None):
    """Two ports per node; the first of each pair PXE-enabled."""
    for i in range(nodes * 2):
        yield {"id": i + 1, "uuid": str(uuid.UUID(int=10**9 + i, version=4)),
               "address": mac_for(i), "node_id": i // 2 + 1, "pxe_enabled": i % 2 == 0,
               "extra": {}, "local_link_connection": {}, "internal_info": {},
               **(extra or {})}


def insert(engine, table, rows) -> None:
    """Insert with SQLAlchemy core in batches (the table's types encode the JSON)."""
    batch = []
    with engine.begin() as conn:
        for row in rows:
            batch.append(row)
            if len(batch) == BATCH:
                conn.execute(table.insert(), batch)
                batch = []
        if batch:
            conn.execute(table.insert(), batch)


def timed(func, samples) -> dict:
    """Median and 95th percentile (ms) of ``func(sample)`` over ``samples``."""
    times = []
    for sample in samples:
        start = time.perf_counter()
        func(sample)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 3),
            "p95_ms": round(times[int(len(times) * 0.95) - 1], 3), "runs": len(times)}


# --- Ironic 39 (inside the baseline venv) ---

def ironic_worker(args) -> None:
    """Create an Ironic database with the data set and time Ironic's lookup_node."""
    db = os.path.join(args.workdir, "ironic.sqlite")
    conf_file = os.path.join(args.workdir, "ironic.conf")
    with open(conf_file, "w") as stream:
        stream.write(f"[database]\nconnection = sqlite:///{db}\n")
    dbsync = os.path.join(os.path.dirname(sys.executable), "ironic-dbsync")
    subprocess.run([dbsync, "--config-file", conf_file, "create_schema"], check=True,
                   capture_output=True)
    import sqlalchemy as sa  # noqa: PLC0415 - baseline venv only
    from ironic.common import context  # noqa: PLC0415
    from ironic.conf import CONF  # noqa: PLC0415
    from ironic.db.sqlalchemy import models  # noqa: PLC0415
    from ironic.drivers.modules import inspect_utils  # noqa: PLC0415
    from ironic.objects import register_all  # noqa: PLC0415

    engine = sa.create_engine(f"sqlite:///{db}")
    insert(engine, models.Node.__table__, node_rows(args.nodes, {"version": "1.40"}))
    insert(engine, models.Port.__table__, port_rows(args.nodes, {"version": "1.12"}))
    engine.dispose()
    logging.disable(logging.CRITICAL)
    register_all()
    CONF([], project="ironic", default_config_files=[])
    CONF.set_override("connection", f"sqlite:///{db}", group="database")
    ctx = context.get_admin_context()
    rng = random.Random(args.seed)
    picks = [rng.randrange(args.nodes) for _ in range(args.repeat)]
    few = picks[: max(5, args.repeat // 20)]  # the BMC scan is slow: fewer samples

    def by_mac(i):
        node = inspect_utils.lookup_node(ctx, [mac_for(2 * i), mac_for(2 * i + 1)], [])
        assert node.uuid == uuid_for(i)

    def by_bmc(i):
        node = inspect_utils.lookup_node(ctx, [], [bmc_for(i)])
        assert node.uuid == uuid_for(i)

    by_mac(picks[0])  # warm up the DB connection
    print(json.dumps({"lookup_by_mac": timed(by_mac, picks),
                      "lookup_by_bmc": timed(by_bmc, few)}))


# --- ours ---

def make_rules(count: int, seed: int) -> list[dict]:
    """Main-phase rules both engines run alike; most match the Dell inventory.

    Only what Ironic 39 supports too: named (dict) arguments, string comparisons (Ironic's
    templates always yield strings, so numbers go through ``force_strings``), no loops, no
    ``early``/``preprocess`` phase, no scope.
    """
    rng = random.Random(seed)
    rules = []
    for i in range(count):
        cond = rng.choice([
            {"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}",
                                        "regex": "(?i)dell"}},
            {"op": "eq", "args": {"values": ["{inventory[memory][physical_mb]}", "196608"],
                                  "force_strings": True}},
            {"op": "in-net", "args": {"address": "{inventory[bmc_address]}",
                                      "subnet": "192.0.2.0/24"}},
            {"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}", "x86_64"]}},
            {"op": "matches", "args": {"value": "{inventory[system_vendor][product_name]}",
                                       "regex": "PowerEdge R6.*"}},
            {"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}",
                                        "regex": "(?i)supermicro"}},  # never matches
        ])
        action = rng.choice([
            {"op": "set-attribute", "args": {"path": f"/extra/rule{i}",
                                             "value": "{inventory[cpu][count]}"}},
            {"op": "set-capability", "args": {"name": f"cap{i}", "value": "true"}},
            {"op": "add-trait", "args": {"name": f"CUSTOM_RULE_{i}"}},
            {"op": "set-plugin-data", "args": {"path": f"rule{i}", "value": "yes"}},
        ])
        rules.append({"description": f"bench rule {i}", "phase": "main", "priority": i % 10,
                      "conditions": [cond], "actions": [action]})
    return rules


def summarise(first: tuple[float, float], warm: list[tuple[float, float]]) -> dict:
    """First and median warm times (ms) of (lookup part, processing part) callbacks."""
    def entry(values):
        return {"median_ms": round(statistics.median(values), 3), "runs": len(values)}
    return {"processing_first": entry([first[1]]),
            "processing_warm": entry([w[1] for w in warm]),
            "callback_first": entry([sum(first)]),
            "callback_warm": entry([sum(w) for w in warm])}


def outcome(engine, node_id: int) -> dict:
    """What a run left on our node, to check both sides did the same work."""
    import sqlalchemy as sa  # noqa: PLC0415 - project venv only

    from inspection.db.models import Node, NodeTrait  # noqa: PLC0415

    with engine.connect() as conn:
        node = conn.execute(sa.select(Node).where(Node.id == node_id)).first()
        traits = conn.execute(sa.select(sa.func.count()).select_from(NodeTrait)
                              .where(NodeTrait.node_id == node_id)).scalar()
    caps = node.properties.get("capabilities", "")
    return {"provision_state": node.provision_state, "last_error": node.last_error,
            "cpu_arch": node.properties.get("cpu_arch"), "extra_keys": len(node.extra),
            "traits": traits, "capabilities": len([c for c in caps.split(",") if c])}


def ours(args) -> dict:
    """Build our database with the data set; time lookup and full processing."""
    import sqlalchemy as sa  # noqa: PLC0415 - project venv only
    from sqlalchemy.orm import Session  # noqa: PLC0415

    from inspection.db import migration  # noqa: PLC0415
    from inspection.db.models import Node, NodeTrait, Port  # noqa: PLC0415
    from inspection.lookup import LookupData, lookup_node  # noqa: PLC0415
    from inspection.processing.service import InspectionService  # noqa: PLC0415
    from pxe_filter.broadcast import FilterNotifier  # noqa: PLC0415
    from pxe_filter.common.database import create_engine  # noqa: PLC0415
    from tests.integration.node_factory import make_conf  # noqa: PLC0415

    engine = create_engine(f"sqlite:///{args.workdir}/ours.sqlite")
    migration.upgrade(engine)
    insert(engine, Node.__table__, node_rows(args.nodes))
    insert(engine, Port.__table__, port_rows(args.nodes))
    logging.disable(logging.CRITICAL)
    rng = random.Random(args.seed)
    picks = [rng.randrange(args.nodes) for _ in range(args.repeat)]

    def by_mac(i):
        with Session(engine) as session:
            node = lookup_node(session, LookupData.build(
                macs=[mac_for(2 * i), mac_for(2 * i + 1)]))
            assert node.uuid == uuid_for(i)

    def by_bmc(i):
        with Session(engine) as session:
            assert lookup_node(session, LookupData.build(
                bmc_addresses=[bmc_for(i)])).uuid == uuid_for(i)

    import sqlite3  # noqa: PLC0415

    raw = sqlite3.connect(f"{args.workdir}/ours.sqlite")

    def raw_by_mac(i):
        # the floor: the same indexed join through the bare driver, no pool, no session
        rows = raw.execute("SELECT nodes.id, nodes.uuid, nodes.provision_state FROM ports "
                           "JOIN nodes ON ports.node_id = nodes.id WHERE ports.address IN "
                           "(?, ?)", (mac_for(2 * i), mac_for(2 * i + 1))).fetchall()
        assert rows[0][1] == uuid_for(i)

    by_mac(picks[0])
    raw_by_mac(picks[0])
    results = {"lookup_by_mac": timed(by_mac, picks), "lookup_by_bmc": timed(by_bmc, picks),
               "raw_driver_by_mac": timed(raw_by_mac, picks)}
    raw.close()
    if args.lookup_only:
        engine.dispose()
        return results

    # Full processing: one more node whose MACs and BMC are the Dell fixture's.
    with open(FIXTURE) as stream:
        body = json.load(stream)
    conf = make_conf(pathlib.Path(args.workdir))
    service = InspectionService.from_conf(conf, engine=engine, notifier=FilterNotifier())
    with service.sessions.begin() as session:
        for doc in make_rules(args.rules, args.seed):
            service.rules.repository.create(session, doc)
    bmc = body["inventory"]["bmc_address"]
    with engine.begin() as conn:
        node_id = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), driver="ipmi", provision_state="inspect wait",
            inspect_interface="agent", driver_internal_info={"lookup_bmc_addresses": [bmc]},
            properties={}, extra={}, driver_info={})).inserted_primary_key[0]
        conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), node_id=node_id,
                                            pxe_enabled=True, address=body["inventory"]
                                            ["interfaces"][0]["mac_address"]))

    def reset():
        with engine.begin() as conn:
            conn.execute(sa.delete(NodeTrait).where(NodeTrait.node_id == node_id))
            conn.execute(sa.update(Node).where(Node.id == node_id).values(
                provision_state="inspect wait", extra={}, properties={},
                driver_internal_info={"lookup_bmc_addresses": [bmc]}))

    def callback(reset_first: bool = True) -> tuple[float, float]:
        if reset_first:
            reset()
        start = time.perf_counter()
        accepted = service.accept(json.loads(json.dumps(body)))
        middle = time.perf_counter()
        service.process(accepted.node_uuid, accepted.data)
        end = time.perf_counter()
        return (middle - start) * 1000, (end - middle) * 1000

    first = callback()  # compiles every rule
    results["processing_outcome"] = outcome(engine, node_id)
    reset()
    statements = []
    sa.event.listen(engine, "before_cursor_execute",
                    lambda _conn, _cursor, sql, *_args: statements.append(sql.split(None, 1)[0]))
    callback(reset_first=False)
    results["sql_per_callback"] = {"statements": len(statements), "writes": sum(
        word.upper() in ("INSERT", "UPDATE", "DELETE") for word in statements)}
    warm = [callback() for _ in range(max(5, args.repeat // 10))]
    last = outcome(engine, node_id)
    assert last == results["processing_outcome"] and last["provision_state"] == "manageable", last
    results.update(summarise(first, warm))
    engine.dispose()
    return results


def run_baseline(args, argv: list[str]) -> dict:
    """Run a script in the baseline venv; the JSON object on its last stdout line."""
    proc = subprocess.run([args.baseline_python, *argv], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        sys.exit(f"Ironic worker {os.path.basename(argv[0])} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run our side, then Ironic's in its venv, and print both as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--rules", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--baseline-python", default=os.environ.get(
        "BASELINE_PYTHON", ".venvs/ironic39/bin/python"))
    parser.add_argument("--workdir")
    parser.add_argument("--output")
    parser.add_argument("--lookup-only", action="store_true",
                        help="time only the lookups (no processing)")
    parser.add_argument("--ironic-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ironic_worker:
        ironic_worker(args)
        return
    sys.path.insert(0, os.path.join(HERE, ".."))
    with tempfile.TemporaryDirectory(prefix="inspection-bench-") as tmp:
        args.workdir = args.workdir or tmp
        os.makedirs(args.workdir, exist_ok=True)
        results = {"nodes": args.nodes, "rules": args.rules, "ours": ours(args)}
        results["ironic"] = run_baseline(args, [
            os.path.abspath(__file__), "--ironic-worker", "--nodes", str(args.nodes),
            "--repeat", str(args.repeat), "--seed", str(args.seed), "--workdir", args.workdir])
        if args.lookup_only:
            finish(args, results)
            return
        # Ironic's processing, on the same database (its 10,000 waiting nodes included)
        rules_file = os.path.join(args.workdir, "rules.json")
        with open(rules_file, "w") as stream:
            json.dump(make_rules(args.rules, args.seed), stream)
        results["ironic"].update(run_baseline(args, [
            os.path.join(HERE, "ironic_processing_baseline.py"), "--inventory", FIXTURE,
            "--rules", rules_file, "--db", os.path.join(args.workdir, "ironic.sqlite"),
            "--workdir", args.workdir, "--runs", str(max(5, args.repeat // 10))]))
    finish(args, results)


def finish(args, results: dict) -> None:
    """Add the speed-ups, print the results and write them to ``--output``."""
    for key in ("lookup_by_mac", "lookup_by_bmc", "processing_first", "processing_warm",
                "callback_first", "callback_warm"):
        if key not in results["ours"]:
            continue
        ratio = results["ironic"][key]["median_ms"] / results["ours"][key]["median_ms"]
        results[f"{key}_speedup"] = round(ratio, 1)
    text = json.dumps(results, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as stream:
            stream.write(text + "\n")


if __name__ == "__main__":
    main()
