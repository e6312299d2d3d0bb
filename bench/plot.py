"""Plot filter_bench.py's JSON results to a PNG (matplotlib: bench venv only, not a project dep).

    .venvs/plot/bin/python bench/plot.py bench-results.json docs/img/pxe_filter_bench.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): no display needed

PHASES = (("first", "first sync"), ("steady", "steady, no change"), ("changed", "1% changed"))
COLOURS = {"first": "tab:blue", "steady": "tab:green", "changed": "tab:orange"}


def main() -> None:
    """Read the results, draw three panels, save the PNG."""
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as handle:
        data = json.load(handle)
    rows = data["summary"]
    ports = [row["ports"] / 1000 for row in rows]
    fig, (ax_sync, ax_bcast, ax_rss) = plt.subplots(1, 3, figsize=(16, 5))

    for phase, label in PHASES:
        colour = COLOURS[phase]
        ax_sync.plot(ports, [r[f"ironic_{phase}_s"] for r in rows], "--o", color=colour,
                     label=f"Ironic 39: {label}")
        ax_sync.plot(ports, [r[f"ours_{phase}_s"] for r in rows], "-s", color=colour,
                     label=f"ours: {label}")
    ax_sync.set_yscale("log")
    ax_sync.set_xlabel("ports (thousands)")
    ax_sync.set_ylabel("seconds per full sync (log)")
    ax_sync.set_title("Full sync, same SQLite database")
    ax_sync.legend(fontsize=8)
    ax_sync.grid(True, which="both", alpha=0.3)

    with_bcast = [r for r in rows if "bcast_p50_ms" in r]
    xs = [r["ports"] / 1000 for r in with_bcast]
    for key, label, style in (("bcast_p50_ms", "p50", "-o"), ("bcast_p99_ms", "p99", "-s"),
                              ("bcast_max_ms", "max", ":^")):
        ax_bcast.plot(xs, [r[key] for r in with_bcast], style, label=label)
    ax_bcast.axhline(50, color="red", linestyle="--", label="target p99 < 50 ms")
    ax_bcast.set_xlabel("ports (thousands)")
    ax_bcast.set_ylabel("ms from cast to file content (log)")
    ax_bcast.set_title("Broadcast via RabbitMQ (ours only:\nIronic has no broadcast)")
    ax_bcast.set_yscale("log")  # a single slow outlier must not flatten p50/p99
    ax_bcast.legend(fontsize=8)
    ax_bcast.grid(True, which="both", alpha=0.3)

    ax_rss.plot(ports, [r["ironic_rss_mb"] for r in rows], "--o", label="Ironic 39 sync process")
    ax_rss.plot(ports, [r["ours_worker_rss_mb"] for r in rows], "-s", label="our sync process")
    ax_rss.plot(xs, [r["daemon_rss_mb"] for r in with_bcast], "-^",
                label="our daemon (ironic-pxe-filter), peak")
    if all(r.get("daemon_ready_rss_mb") for r in with_bcast):
        ax_rss.plot(xs, [r["daemon_ready_rss_mb"] for r in with_bcast], ":^", color="tab:green",
                    label="our daemon, peak at READY (after the first sync)")
    ax_rss.axhline(150e6 / 2**20, color="red", linestyle="--",
                   label="target daemon < 150 MB (143 MiB)")
    ax_rss.set_xlabel("ports (thousands)")
    ax_rss.set_ylabel("peak RSS (MiB)")
    ax_rss.set_title("Peak memory")
    ax_rss.set_ylim(bottom=0)
    ax_rss.legend(fontsize=8)
    ax_rss.grid(True, alpha=0.3)

    meta = data["meta"]
    fig.suptitle(f"ironic-pxe-filter vs Ironic 39 pxe_filter ({meta['cpus']} CPUs, Python "
                 f"{meta['python']}, {meta['date']})")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
