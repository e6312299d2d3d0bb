"""A real, unmodified Ironic 39 for tests: API and conductor in one process, fake hardware.

Installed from the package index into a venv of its own (:mod:`tests.support.venvs`), with its
schema made by its own ``ironic-dbsync``, ``rpc_transport = none`` and versioned notifications
on a RabbitMQ vhost of the test's own. Ironic needs about 15 s to answer.
"""

import socket
import subprocess
import time
from pathlib import Path

import requests

from tests.support import services, venvs
from tests.support.processes import write_config

#: Ironic 39 serves up to 1.99; 1.95 is enough for everything these tests do.
API_VERSION = "1.95"
HEADERS = {"X-OpenStack-Ironic-API-Version": API_VERSION}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Ironic:
    """One running Ironic; ``call(method, path, json=...)`` talks to its API."""

    def __init__(self, workdir: Path, db_url: str, notification_url: str | None) -> None:
        """Write the configuration; ``notification_url`` None sends no notifications."""
        self.bin = venvs.ensure_venv("ironic39", venvs.IRONIC)
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "ironic.log"
        sections: dict[str, dict[str, object]] = {
            "DEFAULT": {
                "auth_strategy": "noauth", "rpc_transport": "none", "host": "test-ironic",
                "enabled_hardware_types": "fake-hardware",
                "enabled_boot_interfaces": "fake", "enabled_deploy_interfaces": "fake",
                "enabled_inspect_interfaces": "agent,no-inspect",
                "default_inspect_interface": "agent",
                "enabled_management_interfaces": "fake", "enabled_power_interfaces": "fake",
                "enabled_network_interfaces": "noop", "default_network_interface": "noop",
                "enabled_console_interfaces": "no-console",
                "enabled_vendor_interfaces": "no-vendor", "enabled_raid_interfaces": "no-raid",
                "enabled_rescue_interfaces": "no-rescue", "enabled_bios_interfaces": "no-bios",
                "enabled_firmware_interfaces": "no-firmware",
                "enabled_storage_interfaces": "noop", "state_path": str(workdir),
                "minimum_memory_warning_only": "true", "log_file": str(self.log_path),
            },
            "database": {"connection": db_url},
            "api": {"host_ip": "127.0.0.1", "port": self.port},
            "dhcp": {"dhcp_provider": "none"},
            "conductor": {"automated_clean": "false", "sync_power_state_interval": "-1"},
            "inspector": {"require_managed_boot": "false"},
            "oslo_concurrency": {"lock_path": str(workdir)},
        }
        if notification_url is not None:
            sections["DEFAULT"]["notification_level"] = "info"
            sections["oslo_messaging_notifications"] = {"driver": "messagingv2",
                                                        "transport_url": notification_url}
        self.config = write_config(workdir / "ironic.conf", sections)
        self.proc: subprocess.Popen | None = None

    def create_schema(self) -> None:
        """``ironic-dbsync create_schema`` (Ironic's own)."""
        result = subprocess.run([str(self.bin / "ironic-dbsync"), "--config-file",
                                 str(self.config), "create_schema"],
                                capture_output=True, text=True, timeout=300)
        if result.returncode:
            services.unavailable("ironic-dbsync", result.stderr[-2000:])

    def start(self, timeout: float = 120) -> "Ironic":
        """Start ``ironic`` and wait until its API answers."""
        self.proc = subprocess.Popen([str(self.bin / "ironic"), "--config-file",
                                      str(self.config)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ironic exited {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(self.url + "/v1", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise AssertionError(f"ironic did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        """The end of Ironic's log file."""
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return "(no log)"

    def call(self, method: str, path: str, **kwargs) -> requests.Response:
        """One API call with the microversion header."""
        return requests.request(method, self.url + path, headers=HEADERS, timeout=30,
                                **kwargs)

    def wait_state(self, node: str, state: str, timeout: float = 30) -> None:
        """Poll until the node reaches ``state``."""
        deadline = time.monotonic() + timeout
        current = None
        while time.monotonic() < deadline:
            current = self.call("GET", f"/v1/nodes/{node}").json()["provision_state"]
            if current == state:
                return
            time.sleep(0.1)
        raise AssertionError(f"node {node} stayed {current!r}, not {state!r}")

    def stop(self) -> None:
        """Terminate Ironic."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
