"""Run one of the project's console scripts as a real subprocess, the way systemd does.

Each process gets a generated INI configuration, its own log file and an abstract
$NOTIFY_SOCKET through which READY/STATUS/WATCHDOG are observed. The service-specific
starters live in tests.support.daemon (ironic-pxe-filter) and tests.support.services_procs
(ironic-inspection-api/-worker).
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import requests

Sections = dict[str, dict[str, object]]


def terminate(proc: "subprocess.Popen | None", timeout: float = 10) -> None:
    """SIGTERM ``proc`` if it still runs, SIGKILL after ``timeout`` s; wait for it."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def console_script(name: str, module: str) -> list[str]:
    """argv prefix running the installed console script (or the module as a fallback)."""
    script = Path(sys.executable).with_name(name)
    if script.exists():
        return [str(script)]
    found = shutil.which(name)
    return [found] if found else [sys.executable, "-m", module]


def write_config(path: Path, sections: Mapping[str, Mapping[str, object]]) -> Path:
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


def merge_sections(base: Sections, *overlays: Mapping[str, Mapping[str, object]] | None
                   ) -> Sections:
    """Merge {section: {option: value}} overlays over ``base`` in order (later options win)."""
    merged: Sections = {section: dict(options) for section, options in base.items()}
    for overlay in overlays:
        for section, options in (overlay or {}).items():
            merged.setdefault(section, {}).update(options)
    return merged


def service_sections(db_url: str, transport_url: str | None, name: str,
                     *overlays: Mapping[str, Mapping[str, object]] | None) -> Sections:
    """Sections every service needs (host ``name``-<random>, database, transport) + overlays."""
    base: Sections = {
        "DEFAULT": {"host": f"{name}-{uuid.uuid4().hex[:8]}"},
        "database": {"connection": db_url},
    }
    if transport_url:
        base["DEFAULT"]["transport_url"] = transport_url
    return merge_sections(base, *overlays)


class ServiceProcess:
    """A running service, its notify socket and its log file."""

    # Defaults when a method is called without a timeout (seconds).
    ready_timeout = 30.0
    wait_timeout = 30.0
    stop_timeout = 10.0

    def __init__(self, name: str, proc: subprocess.Popen, notify: socket.socket,
                 log_path: Path, config_path: Path, *, url: str | None = None,
                 label: str | None = None) -> None:
        self.name, self.proc, self.notify = name, proc, notify
        self.log_path, self.config_path, self.url = log_path, config_path, url
        self.label = label or name  # how error messages name the process
        self.notifications: list[str] = []
        self.ready = False

    @property
    def pid(self) -> int:
        """Process id."""
        return self.proc.pid

    def log_text(self) -> str:
        """Everything the process wrote to stdout/stderr so far."""
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
        """Read notifications for ``seconds`` (the sender drops them when the queue is full)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            self._drain(min(remaining, 0.05))

    def status(self) -> str | None:
        """Last STATUS= the process sent (after reading pending notifications)."""
        self._drain(0.001)
        statuses = [f[len("STATUS="):] for f in self.notifications if f.startswith("STATUS=")]
        return statuses[-1] if statuses else None

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait for READY=1; raise with the log if the process exits or times out first."""
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not self.ready:
            if self.proc.poll() is not None:
                self._drain(0.001)
                if self.ready:
                    break
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode} "
                                   f"before READY:\n{self.log_text()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.label} not READY after {timeout} s:\n"
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
                raise AssertionError(f"{text!r} not logged by {self.label} within "
                                     f"{timeout} s:\n{log}")
            time.sleep(0.05)

    def wait_http(self, timeout: float = 30.0) -> None:
        """Wait until the service at ``.url`` answers HTTP at all (any status)."""
        if self.url is None:
            raise ValueError(f"{self.label} was started without a URL")
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}:\n"
                                   f"{self.log_text()}")
            try:
                requests.get(f"{self.url}/v1/openapi.json", timeout=2)
                return
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.label} not answering after {timeout} s:\n"
                                   f"{self.log_text()}")
            time.sleep(0.1)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process."""
        self.proc.send_signal(signum)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for exit; return the exit status."""
        return self.proc.wait(self.wait_timeout if timeout is None else timeout)

    def kill(self) -> None:
        """SIGKILL (a crash), and reap."""
        self.proc.kill()
        self.proc.wait()

    def dump_stacks(self) -> None:
        """Make the process write every thread's stack to its log (and die): for hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(10)

    def stop(self, timeout: float | None = None) -> int:
        """SIGTERM, wait (kill after ``timeout``), close the socket; return the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.notify.close()
        return self.proc.returncode


P = TypeVar("P", bound=ServiceProcess)


def spawn(
        argv: list[str], name: str, tmp_path: Path, sections: Mapping, *,
        url: str | None = None, debug: bool = False, extra_args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        process_class: Callable[..., P] = ServiceProcess) -> P:
    """Start ``argv`` on ``tmp_path``/``name``.conf, logging to ``name``.log; do not wait.

    ``env`` is applied last, over NOTIFY_SOCKET and friends (e.g. WATCHDOG_USEC);
    ``process_class`` builds the handle (called like ServiceProcess).
    """
    tmp_path = Path(tmp_path)
    config_path = write_config(tmp_path / f"{name}.conf", sections)
    log_path = tmp_path / f"{name}.log"
    # Abstract socket: no path length limit, nothing to clean up.
    address = f"inspection-test-{uuid.uuid4().hex}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + address)
    # PYTHONFAULTHANDLER: SIGABRT dumps every thread's stack into the log (hung tests).
    full_env = dict(os.environ, NOTIFY_SOCKET="@" + address, PYTHONUNBUFFERED="1",
                    PYTHONFAULTHANDLER="1")
    # Only a test that asks for a watchdog gets one (the runner may be under systemd).
    full_env.pop("WATCHDOG_USEC", None)
    full_env.update(env or {})
    argv = [*argv, "--config-file", str(config_path), *extra_args]
    if debug:
        argv.append("--debug")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                                stdin=subprocess.DEVNULL)
    return process_class(name, proc, notify, log_path, config_path, url=url)
