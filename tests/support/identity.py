"""A real Keystone for tests: from the package index in a venv of its own, SQLite, fernet
tokens, served by waitress; set up with ``keystone-manage bootstrap``.

Users, projects, roles and the catalog are made with openstacksdk from the clients venv
(``keystone_setup.py``), as an operator would make them.
"""

import contextlib
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import requests

from tests.support import services, venvs
from tests.support.processes import terminate, write_config

ADMIN_PASSWORD = "keystone-admin-pass"
REGION = "RegionOne"
SETUP_SCRIPT = Path(__file__).with_name("keystone_setup.py")
SERVE_SCRIPT = Path(__file__).with_name("keystone_serve.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Keystone:
    """One running Keystone; ``auth_url`` is its v3 URL."""

    admin_password = ADMIN_PASSWORD

    def __init__(self, workdir: Path) -> None:
        self.bin = venvs.ensure_venv("keystone", venvs.KEYSTONE)
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.auth_url = self.url + "/v3"
        self.log_path = workdir / "keystone.log"
        self.config = write_config(workdir / "keystone.conf", {
            "DEFAULT": {"log_file": str(self.log_path)},
            # No fsync per commit: a test's Keystone needs no durability, and on a busy disk
            # the syncs made it the slowest part of every login.
            "database": {"connection": f"sqlite:///{workdir}/keystone.sqlite",
                         "sqlite_synchronous": False},
            "token": {"provider": "fernet"},
            # bcrypt's fewest rounds: tests make many users, and the default costs ~0.3 s each
            "identity": {"password_hash_rounds": 4},
            "fernet_tokens": {"key_repository": str(workdir / "fernet-keys")},
            "fernet_receipts": {"key_repository": str(workdir / "fernet-receipts")},
        })
        self.proc: subprocess.Popen | None = None

    def _manage(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([str(self.bin / "keystone-manage"), "--config-file",
                                 str(self.config), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    @staticmethod
    def _finish(proc: subprocess.Popen) -> None:
        output, _ = proc.communicate(timeout=300)
        if proc.returncode:
            services.unavailable(f"keystone-manage {proc.args[3]}", output[-2000:])

    def start(self, timeout: float = 60) -> "Keystone":
        """Create the database and keys, bootstrap the admin, serve, wait for an answer."""
        # The keys and the schema are independent: made at once, to save a start of Keystone.
        keys = self._manage("fernet_setup", "--keystone-user", str(os.getuid()),
                            "--keystone-group", str(os.getgid()))
        self._finish(self._manage("db_sync"))
        self._finish(keys)
        self._finish(self._manage("bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
                     "--bootstrap-admin-url", self.auth_url,
                     "--bootstrap-public-url", self.auth_url,
                     "--bootstrap-internal-url", self.auth_url,
                     "--bootstrap-region-id", REGION))
        env = {**os.environ, "OS_KEYSTONE_CONFIG_DIR": str(self.workdir),
               "OS_KEYSTONE_CONFIG_FILES": self.config.name}
        self.proc = subprocess.Popen(
            [str(self.bin / "python"), str(SERVE_SCRIPT), f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=(self.workdir / "waitress.log").open("w"),
            env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"keystone exited {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(self.auth_url, timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise AssertionError(f"keystone did not answer within {timeout} s:\n{self.log()}")

    def setup(self, clients_bin: Path, spec: dict) -> dict:
        """Run keystone_setup.py (openstacksdk) with ``spec``; what it made."""
        command = {"auth_url": self.auth_url, "password": ADMIN_PASSWORD, "region": REGION,
                   **spec}
        proc = subprocess.run([str(clients_bin / "python"), str(SETUP_SCRIPT)],
                              input=json.dumps(command), capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)

    def token(self, user: str, password: str, project: str | None = None) -> str:
        """A token for ``user``, scoped to ``project`` (by name) or else to the system."""
        scope: dict = {"system": {"all": True}}
        if project is not None:
            scope = {"project": {"name": project, "domain": {"id": "default"}}}
        body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"id": "default"}, "password": password}}},
            "scope": scope}}
        response = requests.post(self.auth_url + "/auth/tokens", json=body, timeout=30)
        assert response.status_code == 201, response.text
        return response.headers["X-Subject-Token"]

    def log(self) -> str:
        """The end of Keystone's logs."""
        text = ""
        for path in (self.log_path, self.workdir / "waitress.log"):
            with contextlib.suppress(OSError):
                text += path.read_text(errors="replace")[-3000:]
        return text or "(no log)"

    def stop(self) -> None:
        """Terminate Keystone."""
        terminate(self.proc, 20)
