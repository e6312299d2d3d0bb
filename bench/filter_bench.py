"""PXE filter benchmark: our daemon's sync side by side with Ironic 39's, same database.

For each size: datagen.py makes an SQLite database with Ironic's own schema; one worker runs
Ironic's filter sync (baseline venv), another ours (this venv), each with its own hostsdir,
alternating on the same file: first sync, steady syncs with no change, and syncs after 1% of
nodes changed state (the same changes for both). Then the real ironic-pxe-filter daemon runs
on the same database for broadcast latency through RabbitMQ and peak RSS.

    .venv/bin/python bench/filter_bench.py --sizes 10000,50000,100000
"""

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

import daemon_bench

BENCH = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BASELINE = os.environ.get("BASELINE_PYTHON", ".venvs/ironic39/bin/python")
INSPECTION = ("inspect wait", "inspecting")


class Worker:
    """One filter in its own process, answering the JSON-lines protocol."""

    def __init__(self, name: str, argv: list[str], log_path: str) -> None:
        self.name = name
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1)
        self.request(None)  # the "ready" line

    def request(self, command: str | None) -> dict:
        """Send ``command`` (None: just read the greeting) and return the answer."""
        if command is not None:
            self.proc.stdin.write(json.dumps({"cmd": command}) + "\n")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} worker died; see {self.log.name}")
        return json.loads(line)

    def sync(self) -> float:
        """Seconds one full sync took."""
        return self.request("sync")["seconds"]

    def close(self) -> None:
        """Ask the worker to exit and wait for it."""
        if self.proc.poll() is None:
            self.proc.stdin.write('{"cmd": "quit"}\n')
            self.proc.stdin.close()
            self.proc.wait(60)
        self.log.close()


def generate(baseline: str, db: str, ports: int) -> str:
    """Make the database with datagen.py in the baseline venv; its summary line."""
    proc = subprocess.run([baseline, os.path.join(BENCH, "datagen.py"), "--db", db,
                           "--ports", str(ports)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"datagen failed:\n{proc.stderr}{proc.stdout}")
    return proc.stdout.strip()


def flip_one_percent(db: str, round_no: int) -> int:
    """Flip 1% of the nodes in/out of 'inspect wait' (seeded, identical for both filters)."""
    conn = sqlite3.connect(db)
    try:
        (count,) = conn.execute("SELECT count(*) FROM nodes").fetchone()
        ids = random.Random(1000 + round_no).sample(range(1, count + 1), max(1, count // 100))
        marks = ",".join("?" * len(ids))
        conn.execute(
            f"UPDATE nodes SET provision_state = CASE WHEN provision_state IN "
            f"('inspect wait', 'inspecting') THEN 'manageable' ELSE 'inspect wait' END, "
            f"updated_at = CURRENT_TIMESTAMP WHERE id IN ({marks})", ids)
        conn.commit()
    finally:
        conn.close()
    return len(ids)


def hostsdir_policy(path: str) -> dict[str, str]:
    """File name -> content of every visible file (what dnsmasq reads)."""
    result = {}
    for name in os.listdir(path):
        if not name.startswith("."):
            with open(os.path.join(path, name)) as handle:
                result[name] = handle.read()
    return result


def compare(ironic_dir: str, ours_dir: str) -> int:
    """Number of files whose policy differs between the two hostsdirs."""
    left, right = hostsdir_policy(ironic_dir), hostsdir_policy(ours_dir)
    return sum(1 for name in left.keys() | right.keys() if left.get(name) != right.get(name))


def warm_cache(db: str) -> None:
    """Read the database file once so neither filter pays for the cold page cache."""
    with open(db, "rb") as handle:
        while handle.read(1 << 20):
            pass


def alternate(workers: dict[str, Worker], turn: int) -> list[tuple[str, float]]:
    """One sync per side, the order swapped every turn; dirty pages flushed before each.

    Without the flush, the kernel writing back one side's files would be billed to the other.
    """
    order = list(workers.items())
    if turn % 2:
        order.reverse()
    timings = []
    for side, worker in order:
        os.sync()
        timings.append((side, worker.sync()))
    return timings


def bench_size(ports: int, args: argparse.Namespace, workdir: str) -> dict:
    """All sync measurements for one size."""
    root = os.path.join(workdir, f"ports-{ports}")
    os.makedirs(root)
    db = os.path.join(root, "ironic.sqlite")
    t0 = time.monotonic()
    summary = generate(args.baseline_python, db, ports)
    print(f"  data ({time.monotonic() - t0:.1f} s): {summary}", flush=True)
    warm_cache(db)
    dirs = {side: os.path.join(root, f"hostsdir-{side}") for side in ("ironic", "ours")}
    for path in dirs.values():
        os.makedirs(path)
    workers = {
        "ironic": Worker("ironic", [args.baseline_python,
                                    os.path.join(BENCH, "ironic_filter_baseline.py"),
                                    "--db", db, "--hostsdir", dirs["ironic"]],
                         os.path.join(root, "ironic-worker.log")),
        "ours": Worker("ours", [sys.executable, os.path.join(BENCH, "our_filter_worker.py"),
                                "--db", db, "--hostsdir", dirs["ours"]],
                       os.path.join(root, "our-worker.log")),
    }
    result: dict = {"ports": ports, "data": summary}
    timings: dict = {side: {"first": 0.0, "steady": [], "changed": []} for side in workers}
    try:
        for side, seconds in alternate(workers, 0):
            timings[side]["first"] = seconds
        result["mismatched_files_after_first"] = compare(dirs["ironic"], dirs["ours"])
        for turn in range(args.steady):
            for side, seconds in alternate(workers, turn + 1):
                timings[side]["steady"].append(seconds)
        for round_no in range(args.changed):
            result["flipped_nodes"] = flip_one_percent(db, round_no)
            for side, seconds in alternate(workers, round_no):
                timings[side]["changed"].append(seconds)
        result["mismatched_files_after_changes"] = compare(dirs["ironic"], dirs["ours"])
        for side, worker in workers.items():
            timings[side]["rss_kb"] = worker.request("rss")["VmHWM"]
        if args.profile:
            for side, worker in workers.items():
                answer = worker.request("profile")
                with open(os.path.join(workdir, f"profile-{side}-{ports}.txt"), "w") as out:
                    out.write(answer["profile"])
    finally:
        for worker in workers.values():
            worker.close()
    result["sides"] = timings
    if args.broadcasts:
        daemon = daemon_bench.run(db, root, args.broadcasts)
        result["daemon"] = vars(daemon)
    if not args.keep and not result.get("daemon", {}).get("error"):
        shutil.rmtree(root, ignore_errors=True)  # kept on a daemon error: its log is there
    return result


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (no interpolation: p99 of 500 samples is the 495th)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


def summarise(results: list[dict]) -> list[dict]:
    """One row of medians and ratios per size."""
    rows = []
    for res in results:
        ir, us = res["sides"]["ironic"], res["sides"]["ours"]
        row = {"ports": res["ports"]}
        for phase in ("first", "steady", "changed"):
            a = ir[phase] if phase == "first" else statistics.median(ir[phase])
            b = us[phase] if phase == "first" else statistics.median(us[phase])
            row[f"ironic_{phase}_s"], row[f"ours_{phase}_s"] = a, b
            row[f"{phase}_ratio"] = a / b if b else float("inf")
        row["ironic_rss_mb"] = ir["rss_kb"] / 1024
        row["ours_worker_rss_mb"] = us["rss_kb"] / 1024
        row["mismatched_files"] = (res["mismatched_files_after_first"]
                                   + res["mismatched_files_after_changes"])
        daemon = res.get("daemon")
        if daemon and not daemon["error"] and daemon["latencies_ms"]:
            lat = daemon["latencies_ms"]
            row.update(daemon_rss_mb=daemon["rss_after_broadcasts_kb"] / 1024,
                       daemon_ready_rss_mb=daemon.get("rss_at_ready_kb", 0) / 1024,
                       daemon_ready_s=daemon["ready_seconds"],
                       bcast_n=len(lat), bcast_lost=daemon["lost"],
                       bcast_p50_ms=percentile(lat, 50), bcast_p99_ms=percentile(lat, 99),
                       bcast_max_ms=max(lat))
        elif daemon:
            row["daemon_error"] = daemon["error"] or "no broadcast measured"
        rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    """The human-readable summary: medians, ratios (Ironic / ours), latency, RSS."""
    print("\nSync time in seconds (median; first sync is a single run). ratio = Ironic / ours")
    print(f"{'ports':>7} | {'phase':<8} | {'Ironic 39':>9} | {'ours':>8} | {'ratio':>7}")
    for row in rows:
        for phase in ("first", "steady", "changed"):
            print(f"{row['ports']:>7} | {phase:<8} | {row[f'ironic_{phase}_s']:>9.3f} | "
                  f"{row[f'ours_{phase}_s']:>8.3f} | {row[f'{phase}_ratio']:>6.1f}x")
    print("\nMemory (peak RSS, MiB) and broadcast-to-file latency (ms; Ironic has no broadcast)")
    print("(daemon: peak at READY / peak after 4 more syncs and the broadcasts)")
    print(f"{'ports':>7} | {'Ironic sync':>11} | {'our sync':>8} | {'daemon':>9} | "
          f"{'ready s':>7} | {'bcasts':>6} | {'p50':>6} | {'p99':>6} | {'max':>6} | diff")
    for row in rows:
        if "bcast_p50_ms" in row:
            tail = (f"{row['daemon_ready_rss_mb']:>3.0f} / {row['daemon_rss_mb']:>3.0f} | "
                    f"{row['daemon_ready_s']:>7.2f} | "
                    f"{row['bcast_n']:>6} | {row['bcast_p50_ms']:>6.1f} | "
                    f"{row['bcast_p99_ms']:>6.1f} | {row['bcast_max_ms']:>6.1f}")
        else:
            tail = f"daemon not measured: {row.get('daemon_error', 'disabled')}"
        print(f"{row['ports']:>7} | {row['ironic_rss_mb']:>11.0f} | "
              f"{row['ours_worker_rss_mb']:>8.0f} | {tail} | {row['mismatched_files']}")


def main() -> None:
    """Parse arguments, run every size, print the table and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000,100000",
                        help="comma-separated numbers of ports (default: %(default)s)")
    parser.add_argument("--steady", type=int, default=5, help="steady syncs per side")
    parser.add_argument("--changed", type=int, default=3, help="1%%-changed rounds per side")
    parser.add_argument("--broadcasts", type=int, default=500,
                        help="timed broadcasts per size; 0 skips the daemon run")
    parser.add_argument("--baseline-python", default=DEFAULT_BASELINE,
                        help="python of the venv with Ironic 39 (default: %(default)s)")
    parser.add_argument("--workdir", help="where databases and hostsdirs go (default: a "
                                          "temporary directory, removed afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep databases and hostsdirs")
    parser.add_argument("--profile", action="store_true",
                        help="also cProfile one steady sync per side (profile-*.txt in workdir)")
    parser.add_argument("--output", default="bench-results.json", help="JSON results file")
    parser.add_argument("--table", metavar="JSON",
                        help="only print the tables of an earlier run's results file")
    args = parser.parse_args()
    if args.table:
        with open(args.table) as handle:
            print_table(summarise(json.load(handle)["raw"]))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not os.path.exists(args.baseline_python):
        sys.exit(f"{args.baseline_python} not found: run bench/setup_baseline.sh first")
    workdir = args.workdir or tempfile.mkdtemp(prefix="pxe-filter-bench-")
    os.makedirs(workdir, exist_ok=True)
    started = time.monotonic()
    results = []
    try:
        for ports in sizes:
            print(f"{ports} ports", flush=True)
            t0 = time.monotonic()
            results.append(bench_size(ports, args, workdir))
            print(f"  done in {time.monotonic() - t0:.0f} s", flush=True)
    finally:
        if not args.workdir and not args.keep and not any(
                r.get("daemon", {}).get("error") for r in results):
            shutil.rmtree(workdir, ignore_errors=True)
    rows = summarise(results)
    print_table(rows)
    meta = {"python": sys.version.split()[0], "cpus": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d"), "total_seconds": time.monotonic() - started,
            "steady": args.steady, "changed": args.changed, "broadcasts": args.broadcasts}
    with open(args.output, "w") as out:
        json.dump({"meta": meta, "summary": rows, "raw": results}, out, indent=1)
    print(f"\nResults in {args.output} ({meta['total_seconds']:.0f} s in total)")


if __name__ == "__main__":
    main()
