"""Beside a real Ironic 39: from Ironic's API call returning to the hostsdir file changing.

Part 1 (latency): Ironic (API and conductor in one process, fake hardware) on a fresh
PostgreSQL database; our ``ironic-pxe-filter`` with ``[pxe_filter]ironic_notifications`` and a
one-hour sync period, and Ironic 39's own ``ironic-pxe-filter`` service at its defaults (45 s
period), each with its own hostsdir on the same database. ``--nodes`` manageable nodes with
one port each are moved to inspection one after the other (``inspect``), then back
(``abort``): 2 x ``--nodes`` state changes. For each, the time from the API call returning to
each filter's file holding the new decision (polled every 2 ms).

Part 2 (database load): ``--ports`` ports made by ``datagen.py`` on PostgreSQL; the rows one
full sync of each filter reads (``pg_stat_user_tables``: tuples scanned plus fetched by index,
nodes and ports), and what that means per hour: Ironic's filter syncs every 45 s; ours, with
notifications, once per ``sync_period`` (3600 s here) plus a few indexed rows per
notification.

    .venv/bin/python bench/notification_bench.py --nodes 100 --ports 50000 --output F.json

Needs PostgreSQL and RabbitMQ on localhost (a throw-away database and vhost are made) and
Ironic 39 in ``.venvs/ironic39`` (``bench/setup_baseline.sh``). Not a test: nothing asserts.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import services  # noqa: E402 - after the path set-up
from tests.support.daemon import start_filter  # noqa: E402
from tests.support.ironic import Ironic  # noqa: E402
from tests.support.processes import write_config  # noqa: E402

BENCH = Path(__file__).resolve().parent
OUR_PERIOD = 3600
IRONIC_PERIOD = 45


def mac(index: int) -> str:
    """The MAC of benchmark node ``index``."""
    raw = 0x5254AA000000 + index
    return ":".join(f"{(raw >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p99 and max in milliseconds."""
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(p99 * 1000, 1), "max_ms": round(ordered[-1] * 1000, 1),
            "count": len(ordered)}


class Watch:
    """Polls the files of pending MACs in several hostsdirs; records when each matched."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs
        self.pending: dict[tuple[str, str], tuple[str, float]] = {}
        self.done: dict[str, list[float]] = {name: [] for name in dirs}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def expect(self, address: str, content: str, since: float) -> None:
        with self._lock:
            for name in self.dirs:
                self.pending[(name, address)] = (content, since)

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.pending:
            raise SystemExit(f"{len(self.pending)} change(s) never reached the files")

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                items = list(self.pending.items())
            now = time.monotonic()
            for (name, address), (content, since) in items:
                try:
                    current = (self.dirs[name] / address).read_text()
                except OSError:
                    continue
                if current == content:
                    with self._lock:
                        if self.pending.pop((name, address), None) is not None:
                            self.done[name].append(now - since)
            time.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def latency(args, workdir: Path, vhost: str, db_url: str) -> dict:
    """Part 1."""
    ironic = Ironic(workdir, db_url, vhost)
    ironic.create_schema()
    ironic.start()
    ours_dir, theirs_dir = workdir / "ours", workdir / "ironic-hostsdir"
    ours_dir.mkdir()
    theirs_dir.mkdir()
    nodes = []
    for index in range(args.nodes):
        resp = ironic.call("POST", "/v1/nodes", json={"driver": "fake-hardware",
                                                      "inspect_interface": "agent"})
        node = resp.json()["uuid"]
        ironic.call("POST", "/v1/ports", json={"address": mac(index), "node_uuid": node})
        ironic.call("PUT", f"/v1/nodes/{node}/states/provision", json={"target": "manage"})
        nodes.append(node)
    for node in nodes:
        ironic.wait_state(node, "manageable", timeout=120)
    ours = start_filter(workdir, db_url, ours_dir, debug=False, extra_conf={
        "pxe_filter": {"sync_period": OUR_PERIOD, "ironic_notifications": True},
        "oslo_messaging_notifications": {"transport_url": vhost}})
    theirs_conf = write_config(workdir / "ironic-filter.conf", {
        "DEFAULT": {"log_file": str(workdir / "ironic-filter.log")},
        "database": {"connection": db_url},
        "pxe_filter": {"dhcp_hostsdir": str(theirs_dir)}})
    theirs = subprocess.Popen([str(ironic.bin / "ironic-pxe-filter"), "--config-file",
                               str(theirs_conf)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    watch = Watch({"ours": ours_dir, "ironic": theirs_dir})
    try:
        ours.wait_ready(60)
        deadline = time.monotonic() + 30
        while "Listening for Ironic's notifications" not in ours.log_text():
            if time.monotonic() > deadline:
                raise SystemExit(ours.log_text())
            time.sleep(0.1)
        # Both filters hold every port as denied before the first change.
        for index in range(args.nodes):
            watch.expect(mac(index), f"{mac(index)},ignore\n", time.monotonic())
        watch.wait(IRONIC_PERIOD * 3)
        watch.done = {name: [] for name in watch.dirs}
        for target, content, state in (("inspect", "{}\n", "inspect wait"),
                                       ("abort", "{},ignore\n", "inspect failed")):
            for index, node in enumerate(nodes):
                resp = ironic.call("PUT", f"/v1/nodes/{node}/states/provision",
                                   json={"target": target})
                returned = time.monotonic()
                if resp.status_code != 202:
                    raise SystemExit(f"{target}: {resp.status_code} {resp.text}")
                watch.expect(mac(index), content.format(mac(index)), returned)
                if target == "inspect":
                    ironic.wait_state(node, state)  # abort is refused until then
                time.sleep(args.spacing)
            watch.wait(IRONIC_PERIOD * 3)
            for node in nodes:
                ironic.wait_state(node, state, timeout=60)
    finally:
        watch.stop()
        ours.signal(signal.SIGTERM)
        ours.stop()
        theirs.terminate()
        theirs.wait(20)
        ironic.stop()
    return {name: percentiles(values) for name, values in watch.done.items()} | {
        "raw": watch.done}


def pg_rows(url: str) -> int:
    """Tuples read from nodes and ports so far (scanned + fetched by index)."""
    import sqlalchemy as sa  # noqa: PLC0415

    engine = sa.create_engine(url)
    time.sleep(11)  # an idle backend flushes its statistics within 10 s
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_stat_clear_snapshot()"))
        row = conn.execute(sa.text(
            "SELECT coalesce(sum(seq_tup_read), 0) + coalesce(sum(idx_tup_fetch), 0) "
            "FROM pg_stat_user_tables WHERE relname IN ('nodes', 'ports')")).scalar()
    engine.dispose()
    return int(row)


def database_load(args, baseline_python: str, db_url: str, workdir: Path) -> dict:
    """Part 2."""
    subprocess.run([baseline_python, str(BENCH / "datagen.py"), "--url", db_url, "--ports",
                    str(args.ports)], check=True)
    from pxe_filter.common.database import create_engine  # noqa: PLC0415
    from pxe_filter.source import DatabaseSource  # noqa: PLC0415
    from pxe_filter.sync import FilterSync  # noqa: PLC0415

    source = DatabaseSource(create_engine(db_url, read_only=True))
    ours_dir = workdir / "load-ours"
    ours_dir.mkdir()
    sync = FilterSync(source, str(ours_dir))
    sync.full_sync()  # first sync writes everything; steady state is what repeats
    before = pg_rows(db_url)
    sync.full_sync()
    ours_sync = pg_rows(db_url) - before
    node = next(iter(sync.desired.served_by))
    before = pg_rows(db_url)
    # What a notification for a node leaving inspection costs: the node, then the MACs
    # held as served for it, by address (its ports are not scanned for).
    sync.hint(nodes=[node])
    sync.reconcile_pending()
    ours_notification = pg_rows(db_url) - before
    source.close()

    theirs_dir = workdir / "load-ironic"
    theirs_dir.mkdir()
    worker = subprocess.Popen([baseline_python, str(BENCH / "ironic_filter_baseline.py"),
                               "--url", db_url, "--hostsdir", str(theirs_dir)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              cwd=BENCH)
    worker.stdout.readline()

    def ironic_sync() -> None:
        worker.stdin.write(json.dumps({"cmd": "sync"}) + "\n")
        worker.stdin.flush()
        worker.stdout.readline()

    ironic_sync()
    before = pg_rows(db_url)
    ironic_sync()
    theirs_sync = pg_rows(db_url) - before
    worker.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
    worker.stdin.flush()
    worker.wait(30)
    return {
        "ports": args.ports,
        "ours_rows_per_sync": ours_sync, "ours_rows_per_notification": ours_notification,
        "ironic_rows_per_sync": theirs_sync,
        "ours_rows_per_hour": ours_sync * 3600 // OUR_PERIOD,
        "ironic_rows_per_hour": theirs_sync * 3600 // IRONIC_PERIOD,
    }


def main() -> None:
    """Run both parts and print (and optionally write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--spacing", type=float, default=0.05,
                        help="seconds between two state changes")
    parser.add_argument("--ports", type=int, default=50000)
    parser.add_argument("--output")
    parser.add_argument("--rows-only", action="store_true",
                        help="only count the rows each filter reads per sync")
    parser.add_argument("--baseline-python", default=os.environ.get(
        "BASELINE_PYTHON", str(ROOT / ".venvs/ironic39/bin/python")))
    args = parser.parse_args()
    os.environ.setdefault("THIRDPARTY_VENV_DIR", str(Path(args.baseline_python).parents[2]))
    result = {}
    with tempfile.TemporaryDirectory(prefix="notification-bench-") as tmp:
        workdir = Path(tmp)
        if not args.rows_only:
            vhost = services.create_vhost()
            db_url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
            try:
                result["latency"] = latency(args, workdir, vhost, db_url)
            finally:
                services.delete_vhost(vhost)
                services.drop_database(services.PG_ADMIN_URL, db_url)
        db_url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
        try:
            result["database"] = database_load(args, args.baseline_python, db_url, workdir)
        finally:
            services.drop_database(services.PG_ADMIN_URL, db_url)
    printable = {**result, "latency": {k: v for k, v in result.get("latency", {}).items()
                                       if k != "raw"}}
    print(json.dumps(printable, indent=1))
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
