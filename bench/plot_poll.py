"""Plot poll_bench.py's JSON files to a PNG (matplotlib: plotting venv only).

    .venvs/plot/bin/python bench/plot_poll.py docs/img/poll.png bench/results/poll_100k.json ...
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): no display needed

MODES = {"poll": "poll 1 s + sync 45 s", "poll600": "poll 1 s + sync 600 s",
         "sync": "full sync 45 s only (before)"}
COLOURS = {"poll": "tab:green", "poll600": "tab:blue", "sync": "tab:gray"}
FIGURES = (("p50_s", "change -> file p50 (s, log)", True),
           ("p99_s", "change -> file p99 (s, log)", True),
           ("idle_rows_per_minute", "rows read per idle minute (log)", True),
           ("idle_cpu_percent", "idle CPU, % of one core", False))


def main() -> None:
    """One panel per figure; a bar per (ports, database, mode), whiskers min-max of runs."""
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    bars = []
    for path in sys.argv[2:]:
        with open(path) as handle:
            data = json.load(handle)
        for database, modes in data["databases"].items():
            for mode in [mode for mode in MODES if mode in modes]:
                bars.append((f"{data['ports'] // 1000}k {database}\n{MODES[mode]}",
                             mode, modes[mode]))
    fig, axes = plt.subplots(1, len(FIGURES), figsize=(18, 5.5))
    for ax, (key, title, log) in zip(axes, FIGURES, strict=True):
        medians = [r[key]["median"] for _, _, r in bars]
        low = [m - r[key]["min"] for m, (_, _, r) in zip(medians, bars, strict=True)]
        high = [r[key]["max"] - m for m, (_, _, r) in zip(medians, bars, strict=True)]
        colours = [COLOURS[mode] for _, mode, _ in bars]
        drawn = ax.bar(range(len(bars)), medians, yerr=[low, high], color=colours, capsize=3)
        ax.bar_label(drawn, labels=[f"{m:,.3g}" for m in medians], fontsize=7)
        ax.set_xticks(range(len(bars)), [label for label, _, _ in bars], fontsize=6,
                      rotation=60, ha="right")
        if log:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("No broadcast, no notification: median of runs, whiskers min-max")
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=100)


if __name__ == "__main__":
    main()
