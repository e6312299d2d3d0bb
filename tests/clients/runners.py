"""Run the real clients as subprocesses of their own venv, and read what their user sees."""

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.support.processes import ServiceProcess
from tests.support.services_procs import API_HEADERS

HERE = Path(__file__).parent
#: A client process that takes longer than this is hung.
CLIENT_TIMEOUT = 120


@dataclass
class Server:
    """A running API process and its credentials (None with noauth)."""

    process: ServiceProcess
    auth: tuple[str, str] | None
    #: The database the server uses (for a test to set up what no API call can, e.g. a
    #: deployed node).
    db_url: str | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT``."""
        return self.process.url or ""

    @property
    def callback_url(self) -> str:
        """What the ramdisk gets as ``ipa-inspection-callback-url``."""
        return f"{self.url}/v1/continue_inspection"

    def http(self, method: str, path: str, headers: dict | None = None,
             **kwargs) -> requests.Response:
        """A plain HTTP call (to check what the clients left behind), naming version 1.96
        unless ``headers`` name another."""
        return requests.request(method, self.url + path, auth=self.auth, timeout=10,
                                headers={**API_HEADERS, **(headers or {})}, **kwargs)


def client_env(home: Path) -> dict[str, str]:
    """An environment without the caller's OS_* settings or clouds.yaml."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OS_")}
    env.update(HOME=str(home), PYTHONWARNINGS="ignore", LC_ALL="C.UTF-8")
    return env


class ClientFailed(AssertionError):
    """A client command that was expected to succeed failed."""


@dataclass
class Baremetal:
    """The ``baremetal`` CLI (python-ironicclient's OSC plugin) pointed at a server."""

    bin_dir: Path
    server: Server
    home: Path
    #: ``baremetal``, or ``openstack`` with ``baremetal`` as the first argument (OSC plugin).
    command: str = "baremetal"

    def argv(self, *args: str) -> list[str]:
        """The command line: the issue's way of pointing the client at an endpoint."""
        if self.server.auth is None:
            auth = ["--os-auth-type", "none"]
        else:
            user, password = self.server.auth
            auth = ["--os-auth-type", "http_basic", "--os-username", user,
                    "--os-password", password]
        return [str(self.bin_dir / self.command), *auth, "--os-endpoint", self.server.url,
                *args]

    def run(self, *args: str) -> subprocess.CompletedProcess:
        """Run a command; whatever it exits with."""
        return subprocess.run(self.argv(*args), capture_output=True, text=True,
                              env=client_env(self.home), timeout=CLIENT_TIMEOUT)

    def popen(self, *args: str) -> subprocess.Popen:
        """Start a command (e.g. one that ``--wait``s) without waiting for it."""
        return subprocess.Popen(self.argv(*args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=client_env(self.home))

    def ok(self, *args: str) -> str:
        """Run a command that must succeed; its stdout."""
        proc = self.run(*args)
        if proc.returncode != 0:
            raise ClientFailed(f"{self.command} {' '.join(args)} exited {proc.returncode}:\n"
                               f"{proc.stderr}{proc.stdout}")
        return proc.stdout

    def json(self, *args: str) -> Any:
        """Run a command with ``-f json``; its parsed output."""
        return json.loads(self.ok(*args, "-f", "json"))

    def fails(self, *args: str) -> str:
        """Run a command that must fail (exit 1); what it printed on stderr."""
        proc = self.run(*args)
        assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.stderr.strip()


@dataclass
class SdkResult:
    """What an SDK script run returned: one result per call, with the requests it sent."""

    results: list[dict]

    def ok(self, index: int = 0) -> Any:
        """The value of call ``index``; fails with the SDK's error if it raised."""
        result = self.results[index]
        if "error" in result:
            raise ClientFailed(f"openstacksdk call {index} raised {result['error']}")
        return result["ok"]

    def error(self, index: int = 0) -> dict:
        """The exception call ``index`` raised: ``{"type", "message", "status"}``."""
        result = self.results[index]
        assert "error" in result, f"call {index} succeeded: {result['ok']}"
        return result["error"]

    def requests(self, index: int = 0) -> list[list[str]]:
        """``[method, url]`` of every request call ``index`` sent (discovery included)."""
        return self.results[index]["requests"]


@dataclass
class Sdk:
    """openstacksdk (``openstack.connect(auth_type=..., baremetal_endpoint_override=...)``)."""

    bin_dir: Path
    server: Server
    home: Path
    #: Connect through this cloud of ``$HOME/.config/openstack/clouds.yaml`` (written here).
    cloud: str | None = None

    def run(self, *calls: dict) -> SdkResult:
        """Run ``conn.baremetal.<op>(...)`` calls in one process (see sdk_script.py)."""
        return self.start(*calls).result()

    def start(self, *calls: dict) -> "SdkRun":
        """Start the calls in a process of their own (e.g. a ``wait=True``); do not wait."""
        auth = None
        if self.server.auth is not None:
            auth = {"username": self.server.auth[0], "password": self.server.auth[1]}
        if self.cloud is not None:
            self.write_clouds_yaml(auth)
        command = {"endpoint": self.server.url, "auth": auth, "cloud": self.cloud,
                   "calls": list(calls)}
        proc = subprocess.Popen([str(self.bin_dir / "python"), str(HERE / "sdk_script.py")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=client_env(self.home))
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(command))
        proc.stdin.close()
        proc.stdin = None  # sent: communicate() must not touch it again
        return SdkRun(proc)

    def call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        """One call that must succeed; its value."""
        return self.run(call(op, *args, **kwargs)).ok()

    def write_clouds_yaml(self, auth: dict | None) -> None:
        """The cloud as docs/cli.md shows it (JSON is valid YAML)."""
        cloud: dict[str, Any] = {"auth_type": "none",
                                 "baremetal_endpoint_override": self.server.url}
        if auth is not None:
            cloud.update(auth_type="http_basic", auth={**auth, "endpoint": self.server.url})
        path = self.home / ".config" / "openstack" / "clouds.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"clouds": {self.cloud: cloud}}))


@dataclass
class SdkRun:
    """SDK calls running in a process of their own."""

    proc: subprocess.Popen

    def result(self) -> SdkResult:
        """Wait for the process (killed if hung); what the calls returned."""
        try:
            out, err = self.proc.communicate(timeout=CLIENT_TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.returncode == 0, err
        return SdkResult(json.loads(out)["results"])


def call(op: str, *args: Any, **kwargs: Any) -> dict:
    """One SDK call for :meth:`Sdk.run`."""
    return {"op": op, "args": list(args), "kwargs": kwargs}


@dataclass
class Ipa:
    """ironic-python-agent's inspection (ipa_script.py) posting to a server's callback."""

    bin_dir: Path
    server: Server
    home: Path

    def inspect(self, machine: dict) -> dict:
        """Run IPA's inspection on ``machine``: ``{"uuid", "error", "sent"}``."""
        command = {"callback_url": self.server.callback_url, **machine}
        proc = subprocess.run([str(self.bin_dir / "python"), str(HERE / "ipa_script.py")],
                              input=json.dumps(command), capture_output=True, text=True,
                              env=client_env(self.home), timeout=CLIENT_TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)


def machine(macs: list[str], *, bmc: str | None = None, serial: str = "SN-1") -> dict:
    """A machine for :meth:`Ipa.inspect`: NICs eth0.. with these MACs, PXE from the first."""
    valid = [mac for mac in macs if mac.count(":") == 5]
    return {"bootif": valid[0] if valid else None,
            "interfaces": [{"name": f"eth{i}", "mac": mac, "ipv4": f"192.0.2.{10 + i}"}
                           for i, mac in enumerate(macs)],
            "bmc_address": bmc, "cpu_count": 8, "memory_mb": 16384, "serial": serial,
            "disks": [{"name": "/dev/sda", "size": 480 * 1024**3},
                      {"name": "/dev/sdb", "size": 960 * 1024**3}]}


def wait_for(predicate, timeout: float = 30, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


