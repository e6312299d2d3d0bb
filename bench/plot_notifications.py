"""Plot notification_bench.py's JSON to a PNG (matplotlib: plotting venv only).

    .venvs/plot/bin/python bench/plot_notifications.py results.json docs/img/notifications.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): no display needed

LABELS = {"ours": "ironic-pxe-filter, notifications", "ironic": "Ironic 39's filter (45 s sync)"}


def main() -> None:
    """Latency CDF (log scale) and database rows read per hour."""
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as handle:
        data = json.load(handle)
    fig, (ax_lat, ax_db) = plt.subplots(1, 2, figsize=(13, 5))
    for name, label in LABELS.items():
        values = sorted(v * 1000 for v in data["latency"]["raw"][name])
        share = [(i + 1) / len(values) for i in range(len(values))]
        summary = data["latency"][name]
        ax_lat.step(values, share, where="post",
                    label=f"{label}: p50 {summary['p50_ms']:.0f} ms, p99 "
                          f"{summary['p99_ms']:.0f} ms")
    ax_lat.set_xscale("log")
    ax_lat.set_xlabel("Ironic API call returned -> hostsdir file changed (ms, log scale)")
    ax_lat.set_ylabel("share of state changes")
    ax_lat.set_title(f"{data['latency']['ours']['count']} state changes (inspect, abort)")
    ax_lat.grid(True, which="both", alpha=0.3)
    ax_lat.legend(loc="lower right", fontsize=8)
    db = data["database"]
    names = [LABELS["ours"], LABELS["ironic"]]
    rows = [db["ours_rows_per_hour"], db["ironic_rows_per_hour"]]
    bars = ax_db.bar(names, rows, color=["tab:green", "tab:gray"])
    ax_db.bar_label(bars, labels=[f"{r:,}" for r in rows])
    ax_db.set_yscale("log")
    ax_db.set_ylabel("rows read per hour, steady state (log scale)")
    ax_db.set_title(f"Database load at {db['ports']:,} ports (PostgreSQL)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
