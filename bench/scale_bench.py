"""Our filter near its limits: first sync, steady sync and the daemon's peak RSS up to 1M ports.

Per size, one database (datagen.py, Ironic's schema) and ``--runs`` runs, each on a fresh
hostsdir: the real ``ironic-pxe-filter`` daemon (daemon_bench.py) writes every file in its
first sync (its own logged duration), runs periodic syncs, re-reads every file on SIGHUP and
takes ``--broadcasts`` broadcasts; its peak RSS is ``VmHWM``. Then, the daemon stopped, a
bare sync process (our_filter_worker.py) takes over the populated hostsdir: its first sync is
what a restart costs (every file read), the next ones are steady syncs (nothing changed,
``os.sync()`` before each). The 1-minute load average is sampled throughout.

    .venv/bin/python bench/scale_bench.py --sizes 10000,100000,1000000 --runs 3 \\
        --output bench/results/scale.json
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import daemon_bench
from filter_bench import DEFAULT_BASELINE, Worker, warm_cache

BENCH = os.path.dirname(os.path.abspath(__file__))
DAEMON_SYNCS = 3
# A DEBUG line ends with the logging call's location after the duration.
_SYNC_LINE = re.compile(r"(First|Full) sync: .*; ([0-9.]+) s(?: |$)")


class LoadSampler:
    """The 1-minute load average every ``period`` seconds, in a thread."""

    def __init__(self, period: float = 5.0) -> None:
        self.period = period
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            with open("/proc/loadavg") as handle:
                self.samples.append(float(handle.read().split()[0]))
            if self._stop.wait(self.period):
                return

    def __enter__(self) -> "LoadSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def daemon_sync_times(log_path: str) -> list[tuple[str, float]]:
    """("First"/"Full", seconds) of each sync the daemon logged (DEBUG shows steady ones)."""
    found = []
    with open(log_path) as log:
        for line in log:
            match = _SYNC_LINE.search(line.rstrip())
            if match:
                found.append((match.group(1), float(match.group(2))))
    return found


def one_run(db: str, root: str, args: argparse.Namespace) -> dict:
    """The daemon on a fresh hostsdir, then a bare sync process on the files it wrote."""
    os.makedirs(root)
    with LoadSampler() as load:
        daemon = daemon_bench.run(db, root, args.broadcasts, steady_syncs=args.daemon_syncs,
                                  timeout=args.timeout, debug=True,
                                  options=dict(args.pxe_filter_option))
        result: dict = {"daemon": vars(daemon), "periodic_syncs": args.daemon_syncs,
                        "daemon_syncs": daemon_sync_times(os.path.join(root, "daemon.log"))}
        if daemon.error or args.no_worker:
            result["load"] = load.samples
            return result
        hostsdir = os.path.join(root, "daemon-hostsdir")
        worker = Worker("ours", [sys.executable, os.path.join(BENCH, "our_filter_worker.py"),
                                 "--db", db, "--hostsdir", hostsdir],
                        os.path.join(root, "our-worker.log"))
        try:
            os.sync()
            result["restart_sync_s"] = worker.sync()  # every file read: a daemon restart
            steady = []
            for _ in range(args.steady):
                os.sync()
                steady.append(worker.sync())
            result["steady_sync_s"] = steady
            result["worker_rss_kb"] = worker.request("rss")["VmHWM"]
        finally:
            worker.close()
    result["load"] = load.samples
    return result


def generate(baseline: str, db: str, ports: int, groups: int) -> str:
    """Make the database with datagen.py in the baseline venv; its summary line."""
    argv = [baseline, os.path.join(BENCH, "datagen.py"), "--db", db, "--ports", str(ports)]
    if groups:
        argv += ["--groups", str(groups)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"datagen failed:\n{proc.stderr}{proc.stdout}")
    return proc.stdout.strip()


def spread(values: list[float]) -> dict:
    """Median and min-max of ``values``."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(ports: int, runs: list[dict]) -> dict:
    """Median and spread over the runs of each figure."""
    good = [r for r in runs if not r["daemon"]["error"]]
    row: dict = {"ports": ports, "runs": len(good), "failed": len(runs) - len(good)}
    if not good:
        return row
    firsts = [next(s for kind, s in r["daemon_syncs"] if kind == "First") for r in good]
    row["first_sync_s"] = spread(firsts)
    # the daemon's own periodic syncs after the first (the SIGHUP's is logged after them)
    periodic = [[s for kind, s in r["daemon_syncs"] if kind == "Full"]
                [:r.get("periodic_syncs", DAEMON_SYNCS)] for r in good]
    if all(periodic):
        row["daemon_steady_sync_s"] = spread([statistics.median(p) for p in periodic])
    if all("steady_sync_s" in r for r in good):
        row["steady_sync_s"] = spread([statistics.median(r["steady_sync_s"]) for r in good])
        row["restart_sync_s"] = spread([r["restart_sync_s"] for r in good])
    row["daemon_ready_s"] = spread([r["daemon"]["ready_seconds"] for r in good])
    row["daemon_rss_ready_mb"] = spread([r["daemon"]["rss_at_ready_kb"] / 1024 for r in good])
    row["daemon_rss_peak_mb"] = spread([r["daemon"]["rss_after_reload_kb"] / 1024
                                        for r in good])
    if all("worker_rss_kb" in r for r in good):
        row["worker_rss_mb"] = spread([r["worker_rss_kb"] / 1024 for r in good])
    lat = [x for r in good for x in r["daemon"]["latencies_ms"]]
    if lat:
        row["broadcast_p50_ms"] = statistics.median(lat)
        row["broadcasts_lost"] = sum(r["daemon"]["lost"] for r in good)
    loads = [x for r in good for x in r["load"]]
    row["load"] = spread(loads)
    return row


def print_row(row: dict) -> None:
    """One size's medians [min-max]."""
    def fmt(key: str, unit: str, digits: int) -> str:
        if key not in row:
            return f"{key}: -"
        v = row[key]
        return (f"{key} {v['median']:.{digits}f} {unit} "
                f"[{v['min']:.{digits}f}-{v['max']:.{digits}f}]")
    print(f"{row['ports']:>8} ports, {row['runs']} runs ({row['failed']} failed)")
    for key, unit, digits in (("first_sync_s", "s", 2), ("steady_sync_s", "s", 3),
                              ("daemon_steady_sync_s", "s", 3),
                              ("restart_sync_s", "s", 2), ("daemon_ready_s", "s", 1),
                              ("daemon_rss_ready_mb", "MiB", 0),
                              ("daemon_rss_peak_mb", "MiB", 0), ("worker_rss_mb", "MiB", 0),
                              ("load", "", 1)):
        print(f"    {fmt(key, unit, digits)}")


def main() -> None:
    """Parse arguments, run every size, print medians and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="comma-separated numbers of ports (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=3, help="runs per size (default 3)")
    parser.add_argument("--steady", type=int, default=3, help="timed steady syncs per run")
    parser.add_argument("--daemon-syncs", type=int, default=DAEMON_SYNCS,
                        help="periodic syncs of the daemon before its SIGHUP")
    parser.add_argument("--groups", type=int, default=0,
                        help="spread the nodes over N conductor groups (datagen.py --groups)")
    parser.add_argument("--pxe-filter-option", action="append", default=[],
                        type=lambda text: tuple(text.split("=", 1)), metavar="KEY=VALUE",
                        help="another [pxe_filter] option for the daemon, e.g. "
                             "conductor_groups=group-3 (repeatable)")
    parser.add_argument("--no-worker", action="store_true",
                        help="skip the bare sync process (it builds an unscoped FilterSync); "
                             "steady syncs then come from the daemon's log")
    parser.add_argument("--broadcasts", type=int, default=50,
                        help="timed broadcasts per daemon run (during the SIGHUP re-read)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds allowed for one daemon sync (default %(default)s)")
    parser.add_argument("--baseline-python", default=DEFAULT_BASELINE,
                        help="python of the venv with Ironic 39, for datagen.py")
    parser.add_argument("--workdir", help="databases and hostsdirs (default: a temporary "
                                          "directory, removed afterwards); databases found "
                                          "there as db-N.sqlite are reused")
    parser.add_argument("--keep-hostsdir", metavar="DIR",
                        help="move the last run's hostsdir of the largest size to DIR "
                             "(for dnsmasq_bench.py)")
    parser.add_argument("--output", default="scale-results.json", help="JSON results file")
    parser.add_argument("--resummarise", metavar="JSON",
                        help="only recompute the summaries of an earlier results file")
    args = parser.parse_args()
    if args.resummarise:
        with open(args.resummarise) as handle:
            results = json.load(handle)
        for size in results["sizes"]:
            size["summary"] = summarise(size["summary"]["ports"], size["raw"])
            print_row(size["summary"])
        with open(args.resummarise, "w") as out:
            json.dump(results, out, indent=1)
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    workdir = args.workdir or tempfile.mkdtemp(prefix="pxe-filter-scale-")
    os.makedirs(workdir, exist_ok=True)
    results = {"meta": {"python": sys.version.split()[0], "cpus": os.cpu_count(),
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        "runs": args.runs, "steady": args.steady,
                        "broadcasts": args.broadcasts, "groups": args.groups,
                        "pxe_filter_options": dict(args.pxe_filter_option)}, "sizes": []}
    try:
        for ports in sizes:
            suffix = f"-g{args.groups}" if args.groups else ""
            db = os.path.join(workdir, f"db-{ports}{suffix}.sqlite")
            if not os.path.exists(db):
                t0 = time.monotonic()
                summary = generate(args.baseline_python, db, ports, args.groups)
                print(f"data ({time.monotonic() - t0:.1f} s): {summary}", flush=True)
            runs = []
            for run_no in range(args.runs):
                warm_cache(db)
                root = os.path.join(workdir, f"run-{ports}-{run_no}")
                t0 = time.monotonic()
                runs.append(one_run(db, root, args))
                error = runs[-1]["daemon"]["error"]
                print(f"  {ports} ports, run {run_no + 1}: {time.monotonic() - t0:.0f} s"
                      f"{'; ' + error if error else ''}", flush=True)
                last = ports == max(sizes) and run_no == args.runs - 1
                if last and args.keep_hostsdir and not error:
                    shutil.move(os.path.join(root, "daemon-hostsdir"), args.keep_hostsdir)
                if not error:
                    # rm -rf: quicker than shutil.rmtree on 1M files
                    subprocess.run(["rm", "-rf", root], check=False)
            row = summarise(ports, runs)
            print_row(row)
            results["sizes"].append({"summary": row, "raw": runs})
            with open(args.output, "w") as out:
                json.dump(results, out, indent=1)
    finally:
        if not args.workdir:
            subprocess.run(["rm", "-rf", workdir], check=False)
    print(f"Results in {args.output}")


if __name__ == "__main__":
    main()
