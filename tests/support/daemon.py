"""Run ``ironic-pxe-filter`` as a real subprocess, with a generated configuration.

READY is observed the way systemd observes it: through a datagram socket named in
$NOTIFY_SOCKET. Usage::

    daemon = start_filter(tmp_path, db_url, hostsdir, extra_conf={"pxe_filter": {"sync_period": 1}})
    daemon.wait_ready(15)
    ...
    assert daemon.stop() == 0
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path


def filter_command() -> list[str]:
    """argv prefix that runs the installed console script (or the module as a fallback)."""
    script = Path(sys.executable).with_name("ironic-pxe-filter")
    if script.exists():
        return [str(script)]
    found = shutil.which("ironic-pxe-filter")
    return [found] if found else [sys.executable, "-m", "pxe_filter.cmd"]


def write_config(path: Path, sections: dict[str, dict[str, object]]) -> Path:
    """Write an INI file from {section: {option: value}} (lists joined with commas)."""
    lines = []
    for section, options in sections.items():
        lines.append(f"[{section}]")
        for key, value in options.items():
            if isinstance(value, (list, tuple)):
                value = ",".join(str(v) for v in value)
            elif isinstance(value, bool):
                value = "true" if value else "false"
            lines.append(f"{key} = {value}")
        lines.append("")
    path.write_text("\n".join(lines))
    return path


class FilterProcess:
    """A running daemon, its notify socket and its log file."""

    def __init__(self, proc: subprocess.Popen, notify: socket.socket, log_path: Path,
                 config_path: Path, hostsdir: Path) -> None:
        self.proc = proc
        self.notify = notify
        self.log_path = log_path
        self.config_path = config_path
        self.hostsdir = hostsdir
        self.notifications: list[str] = []
        self.ready = False

    @property
    def pid(self) -> int:
        """Process id of the daemon."""
        return self.proc.pid

    def log_text(self) -> str:
        """Everything the daemon wrote to stdout/stderr so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _drain(self, timeout: float) -> None:
        self.notify.settimeout(max(timeout, 0.001))
        try:
            data = self.notify.recv(65536)
        except (TimeoutError, BlockingIOError):
            return
        for field in data.decode(errors="replace").split("\n"):
            self.notifications.append(field)
            if field == "READY=1":
                self.ready = True

    def collect(self, seconds: float) -> None:
        """Read notifications for ``seconds`` (the daemon drops them when the queue is full)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            self._drain(min(remaining, 0.05))

    def status(self) -> str | None:
        """Last STATUS= the daemon sent (after reading pending notifications)."""
        self._drain(0.001)
        statuses = [f[len("STATUS="):] for f in self.notifications if f.startswith("STATUS=")]
        return statuses[-1] if statuses else None

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait for READY=1; raise with the daemon's log if it exits or times out first."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            if self.proc.poll() is not None:
                self._drain(0.001)
                if self.ready:
                    break
                raise RuntimeError(f"ironic-pxe-filter exited with {self.proc.returncode} "
                                   f"before READY:\n{self.log_text()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"ironic-pxe-filter not READY after {timeout} s:\n"
                                   f"{self.log_text()}")
            self._drain(min(remaining, 0.2))

    def wait_log(self, text: str, timeout: float = 10.0, start: int = 0) -> str:
        """Wait until ``text`` appears in the log after offset ``start``; return the log."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.log_text()
            if text in log[start:]:
                return log
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{text!r} not logged within {timeout} s:\n{log}")
            time.sleep(0.05)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the daemon."""
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 10.0) -> int:
        """Wait for the process to exit; return its exit status."""
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 5.0) -> int:
        """SIGTERM, wait (kill after ``timeout``), close the socket; return the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.notify.close()
        return self.proc.returncode


def start_filter(tmp_path: Path, db_url: str, hostsdir: Path | str,
                 transport_url: str | None = None, extra_conf: dict | None = None, *,
                 name: str = "filter", debug: bool = True,
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None
                 ) -> FilterProcess:
    """Start ``ironic-pxe-filter`` on a generated config in ``tmp_path`` (does not wait).

    ``extra_conf`` is {section: {option: value}} merged over the generated sections; ``name``
    keeps the config, log and RPC server name of several daemons in one test apart; ``env``
    adds environment variables (e.g. WATCHDOG_USEC).
    """
    tmp_path = Path(tmp_path)
    sections: dict[str, dict[str, object]] = {
        "DEFAULT": {"host": f"{name}-{uuid.uuid4().hex[:8]}"},
        "database": {"connection": db_url},
        "pxe_filter": {"dhcp_hostsdir": str(hostsdir)},
    }
    if transport_url:
        sections["DEFAULT"]["transport_url"] = transport_url
    for section, options in (extra_conf or {}).items():
        sections.setdefault(section, {}).update(options)
    config_path = write_config(tmp_path / f"{name}.conf", sections)
    log_path = tmp_path / f"{name}.log"

    # Abstract socket: no path length limit, nothing to clean up.
    address = f"pxe-filter-test-{uuid.uuid4().hex}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + address)
    extra_env = env or {}
    env = dict(os.environ, NOTIFY_SOCKET="@" + address, PYTHONUNBUFFERED="1")
    env.pop("WATCHDOG_USEC", None)
    env.update(extra_env)
    argv = [*filter_command(), "--config-file", str(config_path), *extra_args]
    if debug:
        argv.append("--debug")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL)
    return FilterProcess(proc, notify, log_path, config_path, Path(hostsdir))


def run_filter(tmp_path: Path, db_url: str, hostsdir: Path | str, *args: str,
               extra_conf: dict | None = None, timeout: float = 60.0,
               name: str = "once") -> subprocess.CompletedProcess:
    """Run the daemon to completion (``--once`` or a start-up failure); capture its output."""
    proc = start_filter(tmp_path, db_url, hostsdir, extra_conf=extra_conf, name=name,
                        debug=False, extra_args=args)
    try:
        code = proc.wait(timeout)
    finally:
        proc.stop()
    return subprocess.CompletedProcess(proc.proc.args, code, "", proc.log_text())
