"""dnsmasq's own limits on a large ``--dhcp-hostsdir``: start-up read, SIGHUP re-read, RSS.

Runs a real dnsmasq (needs root for ``ip netns``) inside a throw-away network namespace
holding only a veth pair of its own, with ``--port=0`` (no DNS), ``--keep-in-foreground``
and a DHCP range on that pair: no real network is touched. The hostsdir holds one file per
MAC with the lines our daemon writes (``aa:bb:cc:dd:ee:ff`` / ``aa:bb:cc:dd:ee:ff,ignore``)
plus the wildcard file.

The observable end of a read: dnsmasq logs ``read <path>`` for every file of the hostsdir it
has parsed, at start-up and on each SIGHUP (``set_dynamic_inotify``). The bench follows its
log file (``--log-facility``) and stops the clock when the count of those lines reaches the
number of files; it also records dnsmasq's CPU time over the same span (``/proc/PID/stat``),
which other jobs on the machine do not inflate as they do wall time.

    sudo .venv/bin/python bench/dnsmasq_bench.py --files 100000 --dir /tmp/hd-100k \\
        --runs 3 --output bench/results/dnsmasq_100k.json
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from daemon_bench import proc_status

WILDCARD = "unknown_hosts_filter"
ALLOW_EVERY = 50  # 2% of the MACs allowed, as datagen's nodes on inspection
POLL = 0.02  # seconds between looks at the log
PROGRESS = 10.0  # seconds between progress samples
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def mac_for(index: int) -> str:
    """The MAC of port number ``index`` (the same as datagen.py)."""
    raw = 0x525400000000 + index
    return ":".join(f"{(raw >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def make_hostsdir(path: str, files: int) -> None:
    """``files`` MAC files (2% allow, the rest deny) and the deny wildcard, in ``path``."""
    os.makedirs(path)
    for index in range(files):
        mac = mac_for(index)
        line = f"{mac}\n" if index % ALLOW_EVERY == 0 else f"{mac},ignore\n"
        with open(os.path.join(path, mac), "w") as handle:
            handle.write(line)
    with open(os.path.join(path, WILDCARD), "w") as handle:
        handle.write("*:*:*:*:*:*,ignore\n")


def count_files(path: str) -> int:
    """What dnsmasq reads: the entries that are not dotfiles."""
    with os.scandir(path) as entries:
        return sum(1 for entry in entries if not entry.name.startswith("."))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


class LogFollower:
    """Counts dnsmasq's ``read <hostsdir>/...`` lines as they are appended to its log."""

    def __init__(self, path: str, hostsdir: str) -> None:
        self.path = path
        self.needle = f": read {hostsdir}/".encode()
        self.offset = 0
        self.count = 0
        self._tail = b""

    def poll(self) -> int:
        """Read what was appended since the last call; the count so far."""
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                data = log.read()
        except FileNotFoundError:
            return self.count
        self.offset += len(data)
        data = self._tail + data
        cut = data.rfind(b"\n") + 1  # count whole lines only
        self.count += data[:cut].count(self.needle)
        self._tail = data[cut:]
        return self.count

    def wait_for(self, target: int, pid: int, timeout: float,
                 progress: list[tuple[float, int]]) -> float | None:
        """Monotonic time at which ``target`` lines were seen; None on timeout. Appends
        (seconds, lines) to ``progress`` every PROGRESS seconds (how the rate changes)."""
        start = time.monotonic()
        deadline = start + timeout
        next_sample = start
        while time.monotonic() < deadline:
            count = self.poll()
            if count >= target:
                return time.monotonic()
            if not os.path.exists(f"/proc/{pid}"):
                raise RuntimeError("dnsmasq exited")
            if time.monotonic() >= next_sample:
                progress.append((round(time.monotonic() - start, 2), count))
                next_sample += PROGRESS
            time.sleep(POLL)
        progress.append((round(time.monotonic() - start, 2), self.poll()))
        return None


class Namespace:
    """A network namespace with a veth pair of its own, deleted on exit."""

    def __init__(self) -> None:
        self.name = f"pxebench{os.getpid()}"

    def __enter__(self) -> "Namespace":
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        try:
            for command in (["ip", "link", "set", "lo", "up"],
                            # a veth pair with both ends inside (no dummy module here)
                            ["ip", "link", "add", "bench0", "type", "veth", "peer", "name",
                             "bench1"],
                            ["ip", "addr", "add", "10.255.0.1/24", "dev", "bench0"],
                            ["ip", "link", "set", "bench0", "up"],
                            ["ip", "link", "set", "bench1", "up"]):
                subprocess.run(["ip", "netns", "exec", self.name, *command], check=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["ip", "netns", "delete", self.name], check=False)


def one_run(ns: Namespace, hostsdir: str, files: int, workdir: str, timeout: float) -> dict:
    """Start dnsmasq, time its start-up read, SIGHUP it, time the re-read; RSS after each."""
    log_path = os.path.join(workdir, "dnsmasq.log")
    with open(log_path, "w"):
        pass
    argv = ["ip", "netns", "exec", ns.name, shutil.which("dnsmasq") or "dnsmasq",
            # -k, not --no-daemon: the latter is debug mode and echoes every log line to
            # stderr; -k runs as in production, only in the foreground.
            "--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--interface=bench0",
            "--bind-interfaces", "--dhcp-range=10.255.0.10,10.255.0.250,1h",
            f"--dhcp-hostsdir={hostsdir}", f"--log-facility={log_path}", "--log-dhcp",
            f"--dhcp-leasefile={os.path.join(workdir, 'leases')}", "--pid-file",
            "--user=root", "--group=root"]
    follower = LogFollower(log_path, hostsdir)
    result: dict = {"files": files, "startup_progress": [], "sighup_progress": []}
    start = time.monotonic()
    errors = open(os.path.join(workdir, "stderr"), "w+b")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors)
    try:
        # ip netns exec execs dnsmasq in place: proc.pid is dnsmasq's
        done = follower.wait_for(files, proc.pid, timeout, result["startup_progress"])
        if done is None:
            result["error"] = f"start-up read not done in {timeout:.0f} s"
            result["startup_read_by_timeout"] = follower.count
            result["startup_cpu_s"] = cpu_seconds(proc.pid)
            result["rss_at_timeout_kb"] = proc_status(proc.pid)["VmRSS"]
            return result
        result["startup_s"] = done - start
        result["startup_cpu_s"] = cpu_seconds(proc.pid)
        time.sleep(1.0)  # let it settle: allocations after the last line count too
        status = proc_status(proc.pid)
        result["rss_after_start_kb"], result["hwm_after_start_kb"] = \
            status["VmRSS"], status["VmHWM"]
        cpu0 = cpu_seconds(proc.pid)
        hup = time.monotonic()
        proc.send_signal(signal.SIGHUP)
        done = follower.wait_for(2 * files, proc.pid, timeout, result["sighup_progress"])
        if done is None:
            result["error"] = f"SIGHUP re-read not done in {timeout:.0f} s"
            result["sighup_read_by_timeout"] = follower.count - files
            return result
        result["sighup_s"] = done - hup
        result["sighup_cpu_s"] = cpu_seconds(proc.pid) - cpu0
        time.sleep(1.0)
        status = proc_status(proc.pid)
        result["rss_after_sighup_kb"], result["hwm_after_sighup_kb"] = \
            status["VmRSS"], status["VmHWM"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace").strip()
        errors.close()
        if stderr:
            result["stderr"] = stderr[-500:]
        os.unlink(log_path)  # 1M files: ~80 MB of log per read
    return result


def load_average() -> float:
    """The 1-minute load average now."""
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])


def spread(values: list[float]) -> dict:
    """Median and min-max."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    """Parse arguments, make or reuse the hostsdir, run dnsmasq ``--runs`` times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True,
                        help="the hostsdir: used as it is if it exists (e.g. the daemon's, "
                             "kept by scale_bench.py --keep-hostsdir), else made with --files")
    parser.add_argument("--files", type=int, default=100000,
                        help="MAC files to create when --dir does not exist")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds allowed for one read (default %(default)s)")
    parser.add_argument("--remove", action="store_true", help="delete --dir afterwards")
    parser.add_argument("--output", default="dnsmasq-results.json")
    args = parser.parse_args()
    hostsdir = os.path.abspath(args.dir)
    if not os.path.isdir(hostsdir):
        t0 = time.monotonic()
        make_hostsdir(hostsdir, args.files)
        print(f"made {hostsdir} ({time.monotonic() - t0:.0f} s)", flush=True)
    files = count_files(hostsdir)
    version = subprocess.run(["dnsmasq", "--version"], capture_output=True, text=True,
                             check=False).stdout.splitlines()[0]
    runs = []
    workdir = tempfile.mkdtemp(prefix="dnsmasq-bench-")
    try:
        with Namespace() as ns:
            for run_no in range(args.runs):
                before = load_average()
                run = one_run(ns, hostsdir, files, workdir, args.timeout)
                run["load"] = [before, load_average()]
                runs.append(run)
                print(f"run {run_no + 1}: {json.dumps(run)}", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if args.remove:
            subprocess.run(["rm", "-rf", hostsdir], check=False)
    good = [r for r in runs if "error" not in r]
    summary: dict = {"files": files, "runs": len(good), "dnsmasq": version}
    if good:
        for key in ("startup_s", "startup_cpu_s", "sighup_s", "sighup_cpu_s"):
            summary[key] = spread([r[key] for r in good])
        for key in ("rss_after_start_kb", "rss_after_sighup_kb", "hwm_after_sighup_kb"):
            summary[key.replace("_kb", "_mb")] = spread([r[key] / 1024 for r in good])
        summary["load"] = spread([x for r in good for x in r["load"]])
    print(json.dumps(summary, indent=1))
    with open(args.output, "w") as out:
        json.dump({"summary": summary, "raw": runs,
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, out,
                  indent=1)


if __name__ == "__main__":
    main()
