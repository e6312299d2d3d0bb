"""Run ``ironic-inspection-api`` and ``ironic-inspection-worker`` as real subprocesses.

Each gets a generated configuration, its own log file and (for READY) an abstract
$NOTIFY_SOCKET, the way systemd runs them. Usage::

    worker = start_worker(tmp_path, db_url, rabbit_url, name="w1")
    worker.wait_ready()
    api = start_api(tmp_path, db_url, rabbit_url)
    api.wait_http()
    ...
    assert worker.stop() == 0
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

import requests

from tests.support.daemon import write_config


def console_script(name: str, module: str) -> list[str]:
    """argv prefix running the installed console script (or the module as a fallback)."""
    script = Path(sys.executable).with_name(name)
    if script.exists():
        return [str(script)]
    found = shutil.which(name)
    return [found] if found else [sys.executable, "-m", module]


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServiceProcess:
    """A running service, its notify socket and its log file."""

    def __init__(self, name: str, proc: subprocess.Popen, notify: socket.socket,
                 log_path: Path, config_path: Path, *, url: str | None = None) -> None:
        self.name, self.proc, self.notify = name, proc, notify
        self.log_path, self.config_path, self.url = log_path, config_path, url
        self.notifications: list[str] = []
        self.ready = False

    @property
    def pid(self) -> int:
        """Process id."""
        return self.proc.pid

    def log_text(self) -> str:
        """Everything the process wrote so far."""
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

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait for READY=1; raise with the log if the process exits or times out first."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            if self.proc.poll() is not None:
                self._drain(0.001)
                if self.ready:
                    break
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before "
                                   f"READY:\n{self.log_text()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.name} not READY after {timeout} s:\n"
                                   f"{self.log_text()}")
            self._drain(min(remaining, 0.2))

    def wait_http(self, timeout: float = 30.0) -> None:
        """Wait until the API answers HTTP at all (any status)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n"
                                   f"{self.log_text()}")
            try:
                requests.get(f"{self.url}/v1/openapi.json", timeout=2)
                return
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not answering after {timeout} s:\n"
                                   f"{self.log_text()}")
            time.sleep(0.1)

    def wait(self, timeout: float = 30.0) -> int:
        """Wait for exit; return the exit status."""
        return self.proc.wait(timeout)

    def dump_stacks(self) -> None:
        """Make the process write every thread's stack to its log (and die): for hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(10)

    def kill(self) -> None:
        """SIGKILL (a crash), and reap."""
        self.proc.kill()
        self.proc.wait()

    def stop(self, timeout: float = 10.0) -> int:
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


def _sections(db_url: str, transport_url: str | None, extra_conf: dict | None,
              host: str) -> dict[str, dict[str, object]]:
    sections: dict[str, dict[str, object]] = {
        "DEFAULT": {"host": host},
        "database": {"connection": db_url},
    }
    if transport_url:
        sections["DEFAULT"]["transport_url"] = transport_url
    for section, options in (extra_conf or {}).items():
        sections.setdefault(section, {}).update(options)
    return sections


def _spawn(argv: list[str], name: str, tmp_path: Path, sections: dict, *,
           url: str | None = None, debug: bool = False) -> ServiceProcess:
    config_path = write_config(tmp_path / f"{name}.conf", sections)
    log_path = tmp_path / f"{name}.log"
    address = f"inspection-test-{uuid.uuid4().hex}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + address)
    # PYTHONFAULTHANDLER: SIGABRT dumps every thread's stack into the log (hung tests).
    env = dict(os.environ, NOTIFY_SOCKET="@" + address, PYTHONUNBUFFERED="1",
               PYTHONFAULTHANDLER="1")
    env.pop("WATCHDOG_USEC", None)
    argv = [*argv, "--config-file", str(config_path)]
    if debug:
        argv.append("--debug")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL)
    return ServiceProcess(name, proc, notify, log_path, config_path, url=url)


def start_worker(tmp_path: Path, db_url: str, transport_url: str | None,
                 extra_conf: dict | None = None, *, name: str = "worker",
                 debug: bool = False) -> ServiceProcess:
    """Start ``ironic-inspection-worker`` (host ``name``-<random>) without waiting."""
    sections = _sections(db_url, transport_url, extra_conf,
                         f"{name}-{uuid.uuid4().hex[:8]}")
    argv = console_script("ironic-inspection-worker", "inspection.worker.cmd")
    return _spawn(argv, name, Path(tmp_path), sections, debug=debug)


def start_api(tmp_path: Path, db_url: str, transport_url: str | None = None,
              extra_conf: dict | None = None, *, name: str = "api",
              port: int | None = None) -> ServiceProcess:
    """Start ``ironic-inspection-api`` on 127.0.0.1 (noauth unless ``extra_conf`` says
    otherwise) without waiting; its base URL is ``.url``."""
    port = port or free_port()
    extra = {"api": {"host_ip": "127.0.0.1", "port": port, "auth_strategy": "noauth"}}
    for section, options in (extra_conf or {}).items():
        extra.setdefault(section, {}).update(options)
    sections = _sections(db_url, transport_url, extra, f"{name}-{uuid.uuid4().hex[:8]}")
    argv = console_script("ironic-inspection-api", "inspection.api.cmd")
    return _spawn(argv, name, Path(tmp_path), sections, url=f"http://127.0.0.1:{port}")
