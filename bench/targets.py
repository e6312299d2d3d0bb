"""The performance targets in one run beside Ironic 39: first and steady sync at 50k ports,
lookup by MAC among 10k waiting nodes, rules 100 x 1,000.

Each bench runs ``--runs`` times (default 3) as a subprocess of the project venv, each run
side by side with Ironic 39 from the baseline venv; the ratio of each run is Ironic's time over
ours, and the table shows the median ratio with its spread and the 1-minute load average
sampled every 5 s. Not a test: it reports whether each target was met, nothing fails.

    .venv/bin/python bench/targets.py [--runs 3] [--baseline-python .venvs/ironic39/bin/python]
        [--output bench/results/targets.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from scale_bench import LoadSampler

HERE = os.path.dirname(os.path.abspath(__file__))

#: (name, minimum ratio Ironic / ours)
TARGETS = [("first sync, 50k ports", 4.0), ("steady sync, 50k ports", 40.0),
           ("lookup by MAC, 10k nodes", 10.0), ("rules, 100 x 1,000", 5.0)]


def run_json(argv: list[str], output: str) -> dict:
    """Run one bench with ``--output``; its JSON results."""
    subprocess.run([sys.executable, *argv, "--output", output], check=True,
                   stdout=subprocess.DEVNULL)
    with open(output) as stream:
        return json.load(stream)


def one_run(args, workdir: str, index: int) -> dict[str, float]:
    """The four ratios of one run."""
    base = ["--baseline-python", args.baseline_python]
    sync = run_json([os.path.join(HERE, "filter_bench.py"), "--sizes", "50000", "--steady", "5",
                     "--changed", "1", "--broadcasts", "0", *base],
                    os.path.join(workdir, f"sync-{index}.json"))["summary"][0]
    lookup = run_json([os.path.join(HERE, "inspection_bench.py"), "--lookup-only",
                       "--nodes", "10000", "--repeat", "200", *base],
                      os.path.join(workdir, f"lookup-{index}.json"))
    rules = run_json([os.path.join(HERE, "rules_bench.py"), "--repeat", "1", *base],
                     os.path.join(workdir, f"rules-{index}.json"))
    if rules["applications"][0] != rules["applications"][1]:
        raise SystemExit(f"the two rules engines counted different applications: "
                         f"{rules['applications']}")
    return {TARGETS[0][0]: sync["first_ratio"], TARGETS[1][0]: sync["steady_ratio"],
            TARGETS[2][0]: lookup["lookup_by_mac_speedup"], TARGETS[3][0]: rules["speedup"]}


def main() -> None:
    """Run every bench ``--runs`` times, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-python", default=os.environ.get(
        "BASELINE_PYTHON", ".venvs/ironic39/bin/python"))
    parser.add_argument("--output", default="bench/results/targets.json")
    args = parser.parse_args()
    args.baseline_python = os.path.abspath(args.baseline_python)
    if not os.path.exists(args.baseline_python):
        sys.exit(f"{args.baseline_python} not found: run bench/setup_baseline.sh first")
    started = time.monotonic()
    with LoadSampler() as sampler, tempfile.TemporaryDirectory(prefix="targets-") as workdir:
        runs = []
        for index in range(args.runs):
            runs.append(one_run(args, workdir, index))
            print(f"run {index + 1}: " + ", ".join(f"{k} {v:.1f}x" for k, v in runs[-1].items()),
                  flush=True)
    load = sampler.samples
    rows = []
    print(f"\n{'target':<28} | {'median':>7} | {'spread':>13} | {'goal':>5} | met")
    for name, goal in TARGETS:
        ratios = [run[name] for run in runs]
        median = statistics.median(ratios)
        rows.append({"target": name, "goal": goal, "ratios": ratios, "median": median,
                     "met": median >= goal})
        print(f"{name:<28} | {median:>6.1f}x | {min(ratios):>5.1f}-{max(ratios):>5.1f}x | "
              f"{goal:>4.0f}x | {'yes' if median >= goal else 'NO'}")
    print(f"load average (1 min) during the runs: {min(load):.1f}-{max(load):.1f}, "
          f"median {statistics.median(load):.1f}; {time.monotonic() - started:.0f} s")
    with open(args.output, "w") as stream:
        json.dump({"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
                   "load": load, "rows": rows}, stream, indent=1)


if __name__ == "__main__":
    main()
