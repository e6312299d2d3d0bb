"""A real systemd, booted as PID 1 in a container (``systemd-nspawn --volatile=yes -D /``).

The container sees the host's ``/usr`` read-only, a fresh tmpfs everywhere else, its own network
(loopback only) and what the test binds in: unit files, configuration, a database directory,
the project's checkout and its Python. Tests drive it with ``systemctl`` through ``nsenter``.
The package ``systemd-container`` must match the installed systemd's version (see .ci/run).
"""

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from tests.support import services

ROOT = Path(__file__).resolve().parents[2]


def missing_prerequisites() -> str | None:
    """Why a container cannot boot here, or None."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("systemd-nspawn", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} missing (Debian packages systemd-container, util-linux)"
    if not Path("/usr/lib/systemd/systemd").exists():
        return "systemd missing (Debian package systemd)"
    return None


class Machine:
    """One booted container; ``binds`` maps host paths to container paths (``ro`` or ``rw``)."""

    def __init__(self, workdir: Path, binds: Sequence[tuple[Path, str, bool]]) -> None:
        self.name = f"pxf-sd-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.workdir = workdir
        self.binds = list(binds)
        self.log_path = workdir / "console.log"
        self.proc: subprocess.Popen | None = None
        self.pid1: int | None = None

    def boot(self, timeout: float = 60) -> "Machine":
        """Boot the container and wait until systemd has finished starting up."""
        reason = missing_prerequisites()
        if reason:
            services.unavailable("a real systemd (systemd-nspawn)", reason)
        machine_id = self.workdir / "machine-id"
        # Without a machine-id systemd believes it is the first boot and presets units.
        machine_id.write_text(uuid.uuid4().hex + "\n")
        argv = ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "-D", "/",
                "--volatile=yes", "--private-network", "-M", self.name, "--console=pipe",
                f"--bind-ro={machine_id}:/etc/machine-id", "--bind-ro=/etc/passwd",
                "--bind-ro=/etc/group", f"--bind-ro={ROOT}",
                f"--bind-ro={Path(sys.base_prefix).resolve()}"]
        for host, inside, writable in self.binds:
            argv.append(f"--bind{'' if writable else '-ro'}={host}:{inside}")
        argv.append("-b")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"systemd-nspawn exited {self.proc.returncode}:\n"
                                     f"{self.console()}")
            self.pid1 = self._find_pid1()
            if self.pid1 is not None:
                state = self.systemctl("is-system-running", check=False).stdout.strip()
                if state in ("running", "degraded"):
                    return self
            if time.monotonic() > deadline:
                raise AssertionError(f"the container did not boot in {timeout} s:\n"
                                     f"{self.console()}")
            time.sleep(0.2)

    def _find_pid1(self) -> int | None:
        assert self.proc is not None
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return None
        for pid in children.split():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "systemd":
                    return int(pid)
            except OSError:
                continue
        return None

    def run(self, argv: Sequence[str], check: bool = True, timeout: float = 60
            ) -> subprocess.CompletedProcess:
        """Run ``argv`` inside the container (all its namespaces)."""
        assert self.pid1 is not None, "not booted"
        result = subprocess.run(["nsenter", "-t", str(self.pid1), "-m", "-u", "-i", "-n", "-p",
                                 *argv], capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {result.returncode}:\n"
                                 f"{result.stdout}{result.stderr}")
        return result

    def systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """``systemctl ARGS`` in the container."""
        return self.run(["systemctl", *args], check=check)

    def show(self, unit: str, *props: str) -> dict[str, str]:
        """Properties of ``unit`` (``systemctl show -p``)."""
        out = self.systemctl("show", unit, *(f"-p{p}" for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def path(self, inside: str) -> Path:
        """A container path as seen from the host."""
        return Path(f"/proc/{self.pid1}/root") / inside.lstrip("/")

    def console(self) -> str:
        """What the container printed (systemd's boot messages)."""
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Power the container off (SIGKILL after 20 s) and remove what nspawn left in /run."""
        if self.proc is not None and self.proc.poll() is None:
            # SIGTERM to nspawn asks the container's systemd to power off.
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for leftover in Path("/run/systemd").glob(f"nspawn*/*/{self.name}"):
            shutil.rmtree(leftover, ignore_errors=True)
        for leftover in Path("/run/systemd").glob(f"nspawn*/{self.name}"):
            shutil.rmtree(leftover, ignore_errors=True)
