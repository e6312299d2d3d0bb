"""Plot scale_bench.py and dnsmasq_bench.py results: our filter up to 1M ports beside dnsmasq.

    .venvs/plot/bin/python bench/plot_scale.py bench/results/scale.json \\
        bench/results/dnsmasq_100k.json bench/results/dnsmasq_1m.json docs/img/scale_bench.png

Medians with min-max bars. A dnsmasq read that did not finish within the bench's timeout is
drawn as a hollow marker at the timeout (a lower bound) and its progress curve stops there.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

GOAL_MIB = 400e6 / 2**20  # the 400 MB goal for the daemon's peak RSS


def _bar(ax, xs, cells, label, marker):
    """Median line with min-max error bars for the cells that exist."""
    points = [(x, c) for x, c in zip(xs, cells, strict=True) if c]
    if not points:
        return
    x = [p[0] for p in points]
    med = [p[1]["median"] for p in points]
    low = [p[1]["median"] - p[1]["min"] for p in points]
    high = [p[1]["max"] - p[1]["median"] for p in points]
    ax.errorbar(x, med, yerr=[low, high], marker=marker, capsize=3, label=label)


def _dnsmasq(paths):
    """(files, summary, raw runs) per dnsmasq results file."""
    found = []
    for path in paths:
        with open(path) as handle:
            data = json.load(handle)
        found.append((data["summary"]["files"], data["summary"], data["raw"]))
    return sorted(found, key=lambda item: item[0])


def main() -> None:
    """scale.json, dnsmasq result files..., output PNG."""
    scale_path, *dnsmasq_paths, out = sys.argv[1:]
    with open(scale_path) as handle:
        rows = [size["summary"] for size in json.load(handle)["sizes"]]
    ports = [row["ports"] for row in rows]
    dnsmasq = _dnsmasq(dnsmasq_paths)
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    (sync_ax, rss_ax), (apply_ax, progress_ax) = axes

    _bar(sync_ax, ports, [r.get("first_sync_s") for r in rows], "first sync (every file "
         "written)", "o")
    _bar(sync_ax, ports, [r.get("restart_sync_s") for r in rows], "restart (every file read)",
         "s")
    _bar(sync_ax, ports, [r.get("steady_sync_s") for r in rows], "steady sync (no change)",
         "^")
    sync_ax.set(xscale="log", yscale="log", xlabel="ports", ylabel="seconds",
                title="ironic-pxe-filter: sync time")

    _bar(rss_ax, ports, [r.get("daemon_rss_peak_mb") for r in rows], "our daemon, peak (VmHWM)",
         "o")
    _bar(rss_ax, ports, [r.get("worker_rss_mb") for r in rows], "our bare sync process, peak",
         "s")
    files = [d[0] for d in dnsmasq]
    _bar(rss_ax, files, [d[1].get("hwm_after_sighup_mb") for d in dnsmasq],
         "dnsmasq after start-up and SIGHUP", "^")
    for count, _summary, raw in dnsmasq:
        partial = [r["rss_at_timeout_kb"] / 1024 for r in raw if "rss_at_timeout_kb" in r]
        if partial:
            rss_ax.scatter([count] * len(partial), partial, marker="^", facecolors="none",
                           edgecolors="C2", label="dnsmasq at the timeout (still reading)")
    rss_ax.axhline(GOAL_MIB, color="grey", linestyle="--", label="goal: 400 MB")
    rss_ax.set(xscale="log", xlabel="ports (dnsmasq: files)", ylabel="MiB",
               title="peak memory")

    _bar(apply_ax, ports, [r.get("steady_sync_s") for r in rows], "our steady sync", "^")
    _bar(apply_ax, files, [d[1].get("startup_s") for d in dnsmasq], "dnsmasq start-up read",
         "o")
    _bar(apply_ax, files, [d[1].get("sighup_s") for d in dnsmasq], "dnsmasq SIGHUP re-read",
         "s")
    _bar(apply_ax, files, [d[1].get("startup_cpu_s") for d in dnsmasq],
         "dnsmasq start-up read, its CPU time", "x")
    for count, _summary, raw in dnsmasq:
        for run in raw:
            if "startup_read_by_timeout" in run:
                seconds = run["startup_progress"][-1][0]
                apply_ax.scatter([count], [seconds], marker="o", facecolors="none",
                                 edgecolors="C1",
                                 label=f"dnsmasq start-up: {run['startup_read_by_timeout']:,}"
                                       f" files read by the timeout")
    apply_ax.set(xscale="log", yscale="log", xlabel="ports / files", ylabel="seconds",
                 title="time to take in the whole hostsdir")

    for count, _summary, raw in dnsmasq:
        for kind, style in (("startup_progress", "-"), ("sighup_progress", ":")):
            run = raw[0]
            curve = run.get(kind)
            if curve:
                progress_ax.plot([p[0] for p in curve], [p[1] for p in curve], style,
                                 label=f"{count:,} files, {kind.split('_')[0]} (run 1)")
    progress_ax.set(xlabel="seconds since start / SIGHUP", ylabel="files read",
                    title="dnsmasq: files read over time")

    for ax in axes.flat:
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("Near the limits: ironic-pxe-filter and dnsmasq up to 1M ports")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
