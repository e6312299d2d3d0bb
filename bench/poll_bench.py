"""With no broadcast and no notification: database change -> file, and the idle filter's cost.

For each database (PostgreSQL, MariaDB) and scale (``--ports``), a fresh database filled
with :func:`tests.support.filter_nodes.fill` (two ports a node, Ironic's schema as our
migrations mirror it), then for each mode, ``--runs`` times:

- ``poll``: ``poll_interval = 1`` (the default), ``sync_period = 45`` (the default);
- ``poll600``: ``poll_interval = 1``, ``sync_period = 600``: no full sync falls in the idle
  window, which shows the poll's own cost;
- ``sync``: ``poll_interval = 0``, ``sync_period = 45``: the full-sync-only filter.

A run starts the daemon, makes ``--changes`` state flips from one writer connection (as a
conductor's pool keeps one), ``--gap`` seconds apart, and times each commit -> both of the
node's port files holding the new decision (polled every 5 ms); then an idle window of
``--idle`` seconds: the daemon's CPU (``/proc``) and the rows read from ``nodes`` and
``ports`` (PostgreSQL: ``pg_stat_user_tables`` seq_tup_read + idx_tup_fetch of this
database; MariaDB: the server's ``Rows_read``, which counts every client of the
server: an upper bound on a shared server). Figures are the median of the runs, with their
spread, and the 1-minute load average during the runs.

    .venv/bin/python bench/poll_bench.py --ports 100000 --output bench/results/poll_100k.json

Not a test: nothing asserts.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scale_bench import LoadSampler  # noqa: E402 - beside this file

from inspection.db import migration  # noqa: E402 - after the path set-up
from inspection.db.models import Node  # noqa: E402
from pxe_filter.common.database import create_engine  # noqa: E402
from tests.support import services  # noqa: E402
from tests.support.daemon import start_filter  # noqa: E402
from tests.support.filter_nodes import bulk_mac, fill  # noqa: E402

MODES = {"poll": {"poll_interval": 1, "sync_period": 45},
         "poll600": {"poll_interval": 1, "sync_period": 600},
         "sync": {"poll_interval": 0, "sync_period": 45}}
#: Seconds a flip may take before it is given up (at 1M ports a sync takes a while).
GIVE_UP = 120
ADMIN = {"postgresql": (services.PG_ADMIN_URL, "PostgreSQL"),
         "mariadb": (services.MYSQL_ADMIN_URL, "MariaDB")}


def rows_read(engine) -> int:
    """Rows read so far (see the module's docstring for what each database counts)."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            return int(conn.execute(sa.text(
                "SELECT sum(seq_tup_read + coalesce(idx_tup_fetch, 0)) FROM "
                "pg_stat_user_tables WHERE relname IN ('nodes', 'ports')")).scalar())
        return int(conn.execute(sa.text("SHOW GLOBAL STATUS LIKE 'Rows_read'")).one()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def decided(hostsdir: Path, node: int, allow: bool) -> bool:
    """Both ports of ``node`` have files saying ``allow``."""
    for port in (2 * node - 1, 2 * node):
        try:
            text = (hostsdir / bulk_mac(port)).read_text()
        except FileNotFoundError:
            return False
        if text.strip().endswith(",ignore") is allow:
            return False
    return True


def one_run(url: str, mode: str, args: argparse.Namespace, run: int) -> dict:
    """Start the daemon, time the flips, then measure the idle window."""
    changes = args.sync_changes if mode == "sync" and args.sync_changes else args.changes
    work = Path(tempfile.mkdtemp(prefix=f"pollbench-{mode}-"))
    hostsdir = work / "hostsdir"
    hostsdir.mkdir()
    daemon = start_filter(work, url, hostsdir, extra_conf={"pxe_filter": MODES[mode]},
                          debug=False)
    engine = create_engine(url)
    try:
        daemon.wait_ready(600)
        delays = []
        with engine.connect() as writer:
            time.sleep(1.2)  # connecting published counters of its own (PostgreSQL)
            for flip in range(changes):
                node = 1000 + run * 100 + flip // 2 * 7
                allow = flip % 2 == 0
                with writer.begin():
                    writer.execute(sa.update(Node).where(Node.id == node).values(
                        provision_state="inspect wait" if allow else "manageable"))
                committed = time.monotonic()
                while not decided(hostsdir, node, allow):
                    if time.monotonic() - committed > GIVE_UP:
                        break
                    time.sleep(0.005)
                delays.append(time.monotonic() - committed)
                time.sleep(max(0.0, args.gap - (time.monotonic() - committed)))
        time.sleep(11)  # past the poll margin
        rows0, cpu0, at = rows_read(engine), cpu_seconds(daemon.pid), time.monotonic()
        time.sleep(args.idle)
        seconds = time.monotonic() - at
        rows = rows_read(engine) - rows0
        cpu = cpu_seconds(daemon.pid) - cpu0
    finally:
        engine.dispose()
        daemon.stop()
        shutil.rmtree(work, ignore_errors=True)  # 1M ports: 1M files, about 4 GB
    ordered = sorted(delays)
    return {"p50_s": statistics.median(ordered),
            "p99_s": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
            "max_s": ordered[-1], "delays_s": [round(d, 3) for d in delays],
            "idle_rows_per_minute": round(rows * 60 / seconds),
            "idle_cpu_percent": round(cpu * 100 / seconds, 2)}


def summary(runs: list[dict]) -> dict:
    """Median of the runs, with min and max, for each figure."""
    out = {}
    for key in ("p50_s", "p99_s", "max_s", "idle_rows_per_minute", "idle_cpu_percent"):
        values = [run[key] for run in runs]
        out[key] = {"median": statistics.median(values), "min": min(values),
                    "max": max(values)}
    return out


def main() -> None:
    """Run every database, mode and run; write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ports", type=int, default=100_000)
    parser.add_argument("--databases", default="postgresql,mariadb")
    parser.add_argument("--modes", default="poll,sync")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--sync-changes", type=int, help="flips in sync mode (slow at 1M; "
                        "default --changes)")
    parser.add_argument("--gap", type=float, default=1.5)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    results = {"ports": args.ports, "cpus": os.cpu_count(), "databases": {}}
    if os.path.exists(args.output):
        with open(args.output) as handle:
            results["databases"] = json.load(handle).get("databases", {})
    for database in args.databases.split(","):
        admin, kind = ADMIN[database]
        url = services.create_database(admin, kind)
        try:
            engine = create_engine(url)
            migration.upgrade(engine)
            engine.dispose()
            start = time.monotonic()
            fill(url, args.ports)
            print(f"{database}: {args.ports} ports in {time.monotonic() - start:.0f} s",
                  flush=True)
            for mode in args.modes.split(","):
                runs = []
                with LoadSampler() as load:
                    for run in range(args.runs):
                        runs.append(one_run(url, mode, args, run))
                        print(database, mode, json.dumps(runs[-1]), flush=True)
                results["databases"].setdefault(database, {})[mode] = {
                    **summary(runs), "changes": len(runs[0]["delays_s"]), "gap_s": args.gap,
                    "idle_s": args.idle, "runs": runs,
                    "load_1min": {"median": statistics.median(load.samples),
                                  "max": max(load.samples)}}
                with open(args.output, "w") as handle:
                    json.dump(results, handle, indent=1)
        finally:
            services.drop_database(admin, url)


if __name__ == "__main__":
    main()
