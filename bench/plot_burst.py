"""Plot bench/results/burst.json (bench/burst_bench.py): nodes manageable over time, and the
distribution of callback answer times, ours beside Ironic 39, every run.

    .venvs/plot/bin/python bench/plot_burst.py bench/results/burst.json docs/img/burst_bench.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

PLAIN = FuncFormatter(lambda value, _pos: f"{value:g}")

COLOURS = {"ours": "tab:blue", "ironic": "tab:orange"}
LABELS = {"ours": "ours (API + 2 workers)", "ironic": "Ironic 39"}


def main(source: str, target: str) -> None:
    """Draw both panels from ``source`` into ``target``."""
    with open(source) as stream:
        data = json.load(stream)
    fig, (curve, answers) = plt.subplots(1, 2, figsize=(12, 4.6))
    for side in ("ours", "ironic"):
        for number, run in enumerate(data["runs"]):
            result = run.get(side)
            if result is None:
                continue
            # The curve keeps only the samples where a count changed: draw it as steps.
            times = [0.0] + [point[0] for point in result["curve"]]
            done = [0] + [point[1] for point in result["curve"]]
            load = result["load_1min"]["median"]
            curve.step(times, done, where="post", color=COLOURS[side], alpha=0.8,
                       label=f"{LABELS[side]}, run {number + 1} (load {load:.1f})")
            # Accepted callbacks only; a reset or refused one got no answer time worth
            # showing (the legend counts them).
            ms = sorted(answered - sent for sent, answered, status in result["answers"]
                        if status == 202)
            share = [(i + 1) / len(result["answers"]) for i in range(len(ms))]
            others = len(result["answers"]) - len(ms)
            answers.plot(ms, share, color=COLOURS[side], alpha=0.8,
                         label=f"{LABELS[side]}, run {number + 1}"
                               + (f" ({others} not accepted)" if others else ""))
    nodes = data["nodes"]
    curve.axhline(nodes, color="grey", linewidth=0.5)
    curve.set_xscale("symlog", linthresh=10)
    curve.set_xlabel("seconds since the first callback (linear to 10 s, then log)")
    curve.set_ylabel("nodes manageable")
    curve.set_title(f"{nodes} machines call back at once ({data['senders']} senders)")
    curve.set_xlim(left=0)
    curve.legend(fontsize=7, loc="upper left")
    answers.set_xscale("log")
    answers.set_xlabel("callback answer time, s (log)")
    answers.set_ylabel("share of all callbacks accepted (202) within")
    answers.set_title("answer time of POST /v1/continue_inspection")
    answers.legend(fontsize=7, loc="upper left")
    for axis in (curve, answers):
        axis.grid(True, which="both", alpha=0.3)
        axis.xaxis.set_major_formatter(PLAIN)
        axis.xaxis.set_minor_formatter(FuncFormatter(lambda _value, _pos: ""))
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
