"""Plot the lookup and processing benchmark (bench/results/inspection.json) to a PNG
(matplotlib: plotting venv only).

    .venvs/plot/bin/python bench/plot_inspection.py bench/results/inspection.json \\
        docs/img/inspection_bench.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): no display needed

OURS, IRONIC = "tab:green", "tab:gray"


def _pairs(ax, names, ours, ironic, ratios, *, ours_err=None, ironic_err=None) -> None:
    """Horizontal bars, ours above Ironic's, log scale, the documented ratio beside ours."""
    ys = range(len(names))
    height = 0.38
    bars = ax.barh([y - height / 2 for y in ys], ours, height, color=OURS, label="ours",
                   xerr=ours_err)
    ax.barh([y + height / 2 for y in ys], ironic, height, color=IRONIC, label="Ironic 39",
            xerr=ironic_err)
    ax.bar_label(bars, labels=[f"{o:g} ms ({r}x faster)" for o, r in zip(ours, ratios,
                                                                       strict=True)],
                 fontsize=8, padding=3)
    ax.set_yticks(list(ys), names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.grid(True, axis="x", which="both", alpha=0.3)


def main() -> None:
    """Two panels: lookups (median, p95 as error bar) and processing (first/warm)."""
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as handle:
        data = json.load(handle)
    setup = data["setup"]
    fig, (ax_lookup, ax_proc) = plt.subplots(1, 2, figsize=(15, 4.8))

    lookups = data["lookup_ms"]
    _pairs(ax_lookup, [r["operation"] for r in lookups],
           [r["ours_median"] for r in lookups], [r["ironic_median"] for r in lookups],
           [r["ratio"] for r in lookups],
           ours_err=[[0] * len(lookups), [r["ours_p95"] - r["ours_median"] for r in lookups]],
           ironic_err=[[0] * len(lookups),
                       [r["ironic_p95"] - r["ironic_median"] for r in lookups]])
    ax_lookup.set_xlabel("ms, median (whisker: p95), log scale")
    ax_lookup.set_title(f"Lookup among {setup['waiting_nodes']:,} waiting nodes")

    proc = data["processing_ms"]
    _pairs(ax_proc, [r["operation"] for r in proc], [r["ours"] for r in proc],
           [r["ironic"] for r in proc], [r["ratio"] for r in proc])
    ax_proc.set_xlabel("ms, log scale")
    ax_proc.set_title(f"Processing one callback ({setup['rules']} rules, default hooks)")

    fig.suptitle(f"Inspection: ours vs Ironic 39 ({setup['cpus']} cores, "
                 f"{setup['database']})")
    fig.legend(*ax_proc.get_legend_handles_labels(), loc="upper left")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
