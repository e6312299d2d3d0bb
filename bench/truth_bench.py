"""Commit, then cast: how long until the file says what the database says, with the daemon's
confirming read, beside the code before it (which trusted the broadcast and wrote at once).

For each run and each side, the real daemon on the same Ironic-made SQLite database (datagen.py
in the baseline venv): per operation a node's state is committed (``inspect wait``, then back
to ``available``), an ``update_pxe_filters`` allow or deny is cast, and the time from before
the commit until the MAC's file says so is taken with inotify (bench/daemon_bench.py). Runs
alternate sides; the report is the median of the runs' p50 and p99, with their spread.

    .venv/bin/python bench/truth_bench.py --before /path/to/checkout-before --ports 10000
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(BENCH))

import daemon_bench  # noqa: E402


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> None:
    """Run the benchmark and print (and optionally write) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="checkout of the code to compare to")
    parser.add_argument("--ports", type=int, default=10000)
    parser.add_argument("--ops", type=int, default=400, help="allows and denies per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-python", default=os.environ.get(
        "BASELINE_PYTHON", os.path.join(os.path.dirname(BENCH), ".venvs/ironic39/bin/python")))
    parser.add_argument("--output")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="truth-bench-")
    db = os.path.join(work, "ironic.sqlite")
    subprocess.run([args.baseline_python, os.path.join(BENCH, "datagen.py"), "--db", db,
                    "--ports", str(args.ports)], check=True, capture_output=True)
    figures: dict[str, dict[str, list[float]]] = {}
    for run in range(args.runs):
        for side, source in (("after", None), ("before", args.before)):
            workdir = os.path.join(work, f"{side}-{run}")
            os.makedirs(workdir)
            result = daemon_bench.run(db, workdir, args.ops, steady_syncs=1, source=source)
            if result.error or result.lost:
                sys.exit(f"{side} run {run}: {result.error or f'{result.lost} lost'}")
            lat = result.latencies_ms
            for kind, values in (("allow", lat[0::2]), ("deny", lat[1::2])):
                entry = figures.setdefault(f"{side} {kind}", {"p50": [], "p99": []})
                entry["p50"].append(percentile(values, 0.5))
                entry["p99"].append(percentile(values, 0.99))
            load = os.getloadavg()[0]
            figures.setdefault("load", {"1min": []})["1min"].append(load)
            print(f"run {run} {side}: allow p50 {percentile(lat[0::2], .5):.1f} ms p99 "
                  f"{percentile(lat[0::2], .99):.1f} ms; deny p50 "
                  f"{percentile(lat[1::2], .5):.1f} ms p99 {percentile(lat[1::2], .99):.1f} "
                  f"ms (load {load:.1f})", flush=True)
    summary = {name: {key: {"median": statistics.median(values), "min": min(values),
                            "max": max(values)} for key, values in entry.items()}
               for name, entry in figures.items()}
    print(json.dumps(summary, indent=1))
    if args.output:
        with open(args.output, "w") as out:
            json.dump({"ports": args.ports, "ops": args.ops, "runs": args.runs,
                       "raw": figures, "summary": summary}, out, indent=1)


if __name__ == "__main__":
    main()
