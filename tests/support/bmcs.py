"""Real BMC software for tests: sushy-tools' Redfish emulator (``sushy-emulator --fake``, in
a venv of its own), the pyghmi IPMI BMC of :mod:`tests.support.ipmi_bmc`, and BMCs that
never answer or refuse connections."""

import json
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import bcrypt
import requests

from tests.support import venvs
from tests.support.processes import terminate

ROOT = Path(__file__).resolve().parents[2]


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port nobody listens on right now."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(check, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} not ready after {timeout} s:\n{log.read_text()[-3000:]}")


class SushyEmulator:
    """``sushy-emulator --fake`` with ``count`` powered-off systems, HTTP basic auth, and
    its state in a directory of its own (the fake systems keep state between runs).
    ``nics``: Ethernet interfaces per system (MACs from :meth:`macs`); ``drives``: Redfish
    Drive documents every system shows in a Storage resource ``1`` (none: no storage)."""

    def __init__(self, workdir: Path, count: int = 1, user: str = "admin",
                 password: str = "redfish-pw", *, nics: int = 0,
                 drives: list[dict] | None = None) -> None:
        self.workdir, self.user, self.password = workdir, user, password
        self.nics, self.drives = nics, drives
        self.systems = [str(uuid.uuid4()) for _ in range(count)]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "SushyEmulator":
        """Start it and wait until it answers."""
        bindir = venvs.ensure_venv("sushy-tools", venvs.SUSHY_TOOLS)
        self.workdir.mkdir(parents=True, exist_ok=True)
        auth = self.workdir / "htpasswd"
        auth.write_text(f"{self.user}:"
                        f"{bcrypt.hashpw(self.password.encode(), bcrypt.gensalt(4)).decode()}\n")
        systems = [{"uuid": ident, "name": f"fake-{i}", "power_state": "Off",
                    "external_notifier": False, "nics": [{"mac": m} for m in self.macs(i)]}
                   for i, ident in enumerate(self.systems)]
        config = self.workdir / "emulator.conf"
        config.write_text(f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}\n"
                          f"SUSHY_EMULATOR_STATE_DIR = {str(self.workdir / 'state')!r}\n"
                          f"SUSHY_EMULATOR_AUTH_FILE = {str(auth)!r}\n")
        if self.drives is not None:
            storage = {ident: [{"Id": "1", "Name": "Local Storage Controller",
                                "Drives": [d["Id"] for d in self.drives]}]
                       for ident in self.systems}
            drives = {(ident, "1"): self.drives for ident in self.systems}
            volumes: dict = {(ident, "1"): [] for ident in self.systems}
            with config.open("a") as out:
                out.write(f"SUSHY_EMULATOR_STORAGE = {storage!r}\n"
                          f"SUSHY_EMULATOR_DRIVES = {drives!r}\n"
                          f"SUSHY_EMULATOR_VOLUMES = {volumes!r}\n")
        self.log = self.workdir / "emulator.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(bindir / "sushy-emulator"), "--fake", "--config", str(config),
                 "-i", "127.0.0.1", "-p", str(self.port)], stdout=out,
                stderr=subprocess.STDOUT)
        _wait(self._answers, 30, "sushy-emulator", self.log)
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"sushy-emulator exited:\n{self.log.read_text()[-3000:]}")
        try:
            return requests.get(f"{self.url}/redfish/v1/", timeout=1).ok
        except requests.RequestException:
            return False

    def macs(self, index: int) -> list[str]:
        """The MACs of system ``index``'s interfaces (unique within this emulator)."""
        return [f"52:54:{self.port >> 8 & 255:02x}:{self.port & 255:02x}:{index:02x}:{n:02x}"
                for n in range(self.nics)]

    def driver_info(self, index: int = 0, **changes: object) -> dict:
        """Ironic's driver_info of system ``index`` (``changes`` override keys)."""
        return {"redfish_address": self.url,
                "redfish_system_id": f"/redfish/v1/Systems/{self.systems[index]}",
                "redfish_username": self.user, "redfish_password": self.password,
                **changes}

    def system(self, index: int = 0) -> dict:
        """The system resource as the emulator shows it now."""
        resp = requests.get(f"{self.url}/redfish/v1/Systems/{self.systems[index]}",
                            auth=(self.user, self.password), timeout=5)
        resp.raise_for_status()
        return resp.json()

    def power(self, index: int = 0) -> str:
        """``On`` or ``Off``."""
        return self.system(index)["PowerState"]

    def boot_target(self, index: int = 0) -> str:
        """The boot source override target (``Pxe``, ``UefiHttp``, ``None``...)."""
        return self.system(index)["Boot"]["BootSourceOverrideTarget"]

    def stop(self) -> None:
        """Stop it (only the process this object started)."""
        terminate(self.proc)


class SushyStatic:
    """``sushy-static`` serving a mockup directory (no authentication); it answers every
    POST and PATCH with 204 and logs each request line, which :meth:`requests` reads."""

    def __init__(self, workdir: Path, mockup: Path) -> None:
        self.workdir, self.mockup = workdir, mockup
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "SushyStatic":
        """Start it and wait until it answers."""
        bindir = venvs.ensure_venv("sushy-tools", venvs.SUSHY_TOOLS)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "static.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(bindir / "sushy-static"), "--mockup-files", str(self.mockup),
                 "-i", "127.0.0.1", "-p", str(self.port)], stdout=out,
                stderr=subprocess.STDOUT)
        _wait(self._answers, 30, "sushy-static", self.log)
        return self

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"sushy-static exited:\n{self.log.read_text()[-3000:]}")
        try:
            return requests.get(f"{self.url}/redfish/v1/", timeout=1).ok
        except requests.RequestException:
            return False

    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request served so far."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            # werkzeug colours some lines: the method may follow an escape sequence.
            match = re.search(r"\b(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) (/\S*) HTTP/", line)
            if match:
                found.append((match.group(1), match.group(2)))
        return found

    def stop(self) -> None:
        """Stop it (only the process this object started)."""
        terminate(self.proc)


class IpmiBmc:
    """The pyghmi BMC of :mod:`tests.support.ipmi_bmc` on a UDP port of 127.0.0.1."""

    def __init__(self, workdir: Path, user: str = "admin", password: str = "ipmi-pw") -> None:
        self.workdir, self.user, self.password = workdir, user, password
        self.port = free_port(socket.SOCK_DGRAM)
        self.state_file = workdir / "bmc-state.json"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "IpmiBmc":
        """Start it; ready once it wrote its state file."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "ipmi-bmc.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.ipmi_bmc", "--port", str(self.port),
                 "--user", self.user, "--password", self.password,
                 "--state", str(self.state_file)], cwd=ROOT, stdout=out,
                stderr=subprocess.STDOUT)
        _wait(lambda: self.state_file.exists() or self.proc.poll() is not None, 15,
              "IPMI BMC", self.log)
        if self.proc.poll() is not None:
            raise RuntimeError(f"IPMI BMC exited:\n{self.log.read_text()[-3000:]}")
        return self

    def driver_info(self, **changes: object) -> dict:
        """Ironic's driver_info for this BMC."""
        return {"ipmi_address": "127.0.0.1", "ipmi_port": self.port,
                "ipmi_username": self.user, "ipmi_password": self.password, **changes}

    def state(self) -> dict:
        """``{"power": "on"|"off", "boot": device, "log": [events]}``."""
        return json.loads(self.state_file.read_text())

    def stop(self) -> None:
        """Stop it (only the process this object started)."""
        terminate(self.proc)


class SilentBmc:
    """A TCP port that accepts connections and never answers (a hung BMC), and a UDP port
    that swallows every datagram (a hung IPMI BMC)."""

    def __init__(self) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(128)  # never accepted: connects succeed, requests get no answer
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.tcp.getsockname()[1]}"
        self.udp_port = self.udp.getsockname()[1]

    def close(self) -> None:
        """Close both sockets."""
        self.tcp.close()
        self.udp.close()
