"""Plot the rules benchmark (bench/results/rules.json) to a PNG (matplotlib: plotting venv only).

    .venvs/plot/bin/python bench/plot_rules.py bench/results/rules.json docs/img/rules_bench.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): no display needed


def main() -> None:
    """Seconds per engine for each recorded run, with the ratio above our bar."""
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as handle:
        data = json.load(handle)
    setup, runs = data["setup"], data["runs"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.38
    xs = range(len(runs))
    ours = ax.bar([x - width / 2 for x in xs], [r["ours_s"] for r in runs], width,
                  color="tab:green", label="ours")
    ironic = ax.bar([x + width / 2 for x in xs], [r["ironic_s"] for r in runs], width,
                    color="tab:gray", label="Ironic 39")
    ax.bar_label(ours, labels=[f"{r['ours_s']:.2f} s ({r['ironic_s'] / r['ours_s']:.1f}x "
                               f"faster)" for r in runs], fontsize=8)
    ax.bar_label(ironic, labels=[f"{r['ironic_s']:.2f} s" for r in runs], fontsize=8)
    ax.set_xticks(list(xs), [r["label"] for r in runs])
    ax.set_ylabel("seconds (lower is better)")
    ax.set_title(f"{setup['rules']} rules x {setup['inventories']:,} inventories "
                 f"({setup['rule_applications']:,} rule applications each), "
                 f"{setup['cpus']} cores", fontsize=10)
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Inspection rules engine: ours vs Ironic 39")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
