"""The real ``ironic-pxe-filter`` daemon under load: peak RSS and broadcast-to-file latency.

Starts the daemon on a benchmark database with a fresh RabbitMQ vhost, waits for READY (on a
NOTIFY_SOCKET we bind), lets it run a few periodic syncs, disables the periodic sync through
SIGHUP, then sends broadcasts one at a time and times each from just before the cast to the
moment the MAC's file holds the new line (inotify on the hostsdir).
"""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field

from inotify_simple import INotify
from inotify_simple import flags as iflags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)  # tests.support.services: the vhost helpers the tests use

# oslo.service's backend selection imports futurist, which imports eventlet when installed.
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")

WARM_UP = 5  # broadcasts not counted: the first cast opens the connection
TIMEOUT = 10.0  # seconds to wait for one broadcast to reach its file


@dataclass
class DaemonResult:
    """What one daemon run measured."""

    ready_seconds: float = 0.0
    rss_at_ready_kb: int = 0
    rss_per_sync_kb: list[int] = field(default_factory=list)  # VmHWM after each later sync
    rss_after_syncs_kb: int = 0
    rss_after_broadcasts_kb: int = 0
    rss_after_reload_kb: int = 0  # VmHWM once the SIGHUP's sync (every file re-read) is done
    syncs: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    lost: int = 0
    error: str | None = None


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid``, KiB."""
    result = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                result[key] = int(value.split()[0])
    return result


def _write_conf(path: str, db: str, hostsdir: str, url: str, period: int, *,
                debug: bool = False, options: dict[str, str] | None = None) -> None:
    extra = "".join(f"{key} = {value}\n" for key, value in (options or {}).items())
    with open(path, "w") as conf:
        conf.write(f"[DEFAULT]\ntransport_url = {url}\nhost = bench\ndebug = {debug}\n"
                   f"[database]\nconnection = sqlite:///{db}\n"
                   f"[pxe_filter]\ndhcp_hostsdir = {hostsdir}\nsync_period = {period}\n"
                   f"{extra}")


class _Notify:
    """The systemd notification socket, as systemd would bind it for the unit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)

    def wait_for(self, needle: str, timeout: float, proc: subprocess.Popen) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"daemon exited with status {proc.returncode}")
            self.sock.settimeout(min(1.0, max(deadline - time.monotonic(), 0.01)))
            try:
                message = self.sock.recv(4096).decode()
            except TimeoutError:
                continue
            if needle in message:
                return message
        raise RuntimeError(f"no {needle!r} from the daemon within {timeout:.0f} s")

    def close(self) -> None:
        self.sock.close()
        os.unlink(self.path)


def _denied_macs(db: str, count: int) -> list[str]:
    """MACs of ports on nodes not on inspection (denied after a sync), read-only."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT p.address FROM ports p JOIN nodes n ON p.node_id = n.id "
            "WHERE n.provision_state = 'available' ORDER BY p.id LIMIT ?", (count,)).fetchall()
    finally:
        conn.close()
    return [row[0] for row in rows]


def _time_broadcasts(transport, hostsdir: str, ops: list[tuple[str, bool]],
                     result: DaemonResult, *, count: bool, db: str) -> None:
    """Per op, as a conductor does it: commit the node's new state, then cast; timed from
    before the commit until the file says so."""
    from pxe_filter import broadcast  # noqa: PLC0415

    inotify = INotify()
    inotify.add_watch(hostsdir, iflags.MOVED_TO | iflags.CLOSE_WRITE)
    writer = sqlite3.connect(db, timeout=30)
    try:
        for mac, allow in ops:
            want = f"{mac}\n" if allow else f"{mac},ignore\n"
            path = os.path.join(hostsdir, mac)
            start = time.perf_counter()
            writer.execute("UPDATE nodes SET provision_state = ?, updated_at = datetime('now') "
                           "WHERE id = (SELECT node_id FROM ports WHERE address = ?)",
                           ("inspect wait" if allow else "available", mac))
            writer.commit()
            if allow:
                broadcast.broadcast(transport, allow=[mac])
            else:
                broadcast.broadcast(transport, deny=[mac])
            deadline = start + TIMEOUT
            done = False
            while not done and time.perf_counter() < deadline:
                remaining = max(deadline - time.perf_counter(), 0.001)
                for event in inotify.read(timeout=int(remaining * 1000) + 1):
                    if event.name == mac:
                        with open(path) as handle:
                            if handle.read() == want:
                                done = True
                                break
            elapsed = (time.perf_counter() - start) * 1000
            if not count:
                continue
            if done:
                result.latencies_ms.append(elapsed)
            else:
                result.lost += 1
    finally:
        writer.close()
        inotify.close()


def _log_tail(path: str) -> str:
    try:
        with open(path) as log:
            lines = [line.strip() for line in log if " WARNING " in line
                     or " ERROR " in line or " CRITICAL " in line]
    except OSError:
        return "(no log)"
    return " | ".join(lines[-3:]) or "(nothing logged)"


def run(db: str, workdir: str, broadcasts: int, steady_syncs: int = 3, *,
        timeout: float = 300, debug: bool = False,
        options: dict[str, str] | None = None, source: str | None = None) -> DaemonResult:
    """Run the daemon on ``db`` and measure it; errors are reported in the result.

    ``timeout``: seconds allowed for READY (the first sync) and for each later sync;
    ``debug``: log at DEBUG (a steady sync's summary line is only logged then);
    ``options``: more ``[pxe_filter]`` options (e.g. a scope); ``source``: run the daemon
    of another checkout of this repository (its directory), e.g. the code before a change.
    """
    from pxe_filter.common import messaging  # noqa: PLC0415
    from tests.support import services  # noqa: PLC0415

    result = DaemonResult()
    hostsdir = os.path.join(workdir, "daemon-hostsdir")
    os.makedirs(hostsdir)
    conf_path = os.path.join(workdir, "daemon.conf")
    log_path = os.path.join(workdir, "daemon.log")
    try:
        url = services.create_vhost()
    except BaseException as exc:  # pytest.skip/fail outside pytest: report, don't crash
        result.error = f"RabbitMQ vhost: {exc}"
        return result
    notify = _Notify(os.path.join(workdir, "notify.sock"))
    proc = None
    transport = None
    try:
        _write_conf(conf_path, db, hostsdir, url, period=1, debug=debug, options=options)
        start = time.monotonic()
        env = {**os.environ, "NOTIFY_SOCKET": notify.path}
        if source:  # another checkout's daemon (e.g. the code before a change), same venv
            env["PYTHONPATH"] = source
        with open(log_path, "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "pxe_filter.cmd", "--config-file",
                                     conf_path], stdout=log, stderr=subprocess.STDOUT,
                                    env=env, cwd=source or None)
        notify.wait_for("READY=1", timeout, proc)
        result.ready_seconds = time.monotonic() - start
        result.rss_at_ready_kb = proc_status(proc.pid)["VmHWM"]
        for _ in range(steady_syncs):  # periodic syncs, one second apart
            notify.wait_for("STATUS=", timeout, proc)
            result.syncs += 1
            result.rss_per_sync_kb.append(proc_status(proc.pid)["VmHWM"])
        # Periodic sync off (SIGHUP re-reads it), so only broadcasts touch the files now.
        _write_conf(conf_path, db, hostsdir, url, period=0, debug=debug, options=options)
        proc.send_signal(signal.SIGHUP)
        notify.wait_for("STATUS=", timeout, proc)
        result.syncs += 1
        result.rss_per_sync_kb.append(proc_status(proc.pid)["VmHWM"])
        result.rss_after_syncs_kb = proc_status(proc.pid)["VmHWM"]

        pool = _denied_macs(db, WARM_UP + (broadcasts + 1) // 2)
        ops = [(mac, allow) for mac in pool[WARM_UP:] for allow in (True, False)][:broadcasts]
        messaging.oslo_messaging_module()
        transport = messaging.get_transport(url)
        _time_broadcasts(transport, hostsdir, [(m, True) for m in pool[:WARM_UP]], result,
                         count=False, db=db)
        _time_broadcasts(transport, hostsdir, ops, result, count=True, db=db)
        result.rss_after_broadcasts_kb = proc_status(proc.pid)["VmHWM"]
        # The broadcasts start at RELOADING; at 1M ports the re-read outlasts them.
        notify.wait_for("READY=1", timeout, proc)
        result.rss_after_reload_kb = proc_status(proc.pid)["VmHWM"]
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}; daemon log ends: {_log_tail(log_path)}"
    finally:
        if transport is not None:
            transport.cleanup()
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        notify.close()
        services.delete_vhost(url)
    return result
