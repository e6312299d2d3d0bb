"""Plot bench/targets.py's results: each ratio's runs and median against its goal.

    .venvs/plot/bin/python bench/plot_targets.py bench/results/targets.json docs/img/targets.png
"""

import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main() -> None:
    """Read the JSON, draw one panel per target, write the PNG."""
    source, target = sys.argv[1], sys.argv[2]
    with open(source) as stream:
        data = json.load(stream)
    rows = data["rows"]
    fig, axes = plt.subplots(1, len(rows), figsize=(3.2 * len(rows), 3.6))
    for ax, row in zip(axes, rows, strict=True):
        ratios = row["ratios"]
        ax.scatter(range(1, len(ratios) + 1), ratios, color="tab:blue", label="each run")
        ax.axhline(row["median"], color="tab:blue", linestyle="-", linewidth=1,
                   label=f"median {row['median']:.1f}x")
        ax.axhline(row["goal"], color="tab:red", linestyle="--", linewidth=1,
                   label=f"goal {row['goal']:.0f}x")
        ax.set_title(row["target"], fontsize=9)
        ax.set_xlabel("run")
        ax.set_xticks(range(1, len(ratios) + 1))
        ax.set_ylim(0, max(max(ratios), row["goal"]) * 1.25)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("Ironic 39 time / ours")
    load = data["load"]
    fig.suptitle(f"Beside Ironic 39, {data['date']}, {data['cpus']} CPUs, load average "
                 f"{min(load):.1f}-{max(load):.1f} (median {statistics.median(load):.1f})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main()
