"""A fresh machine's /etc, /var/lib and /run, for running the shipped files as shipped.

A holder process in a private mount namespace overlays /etc, /var/lib and /run with tmpfs
upper layers and removes (whiteouts, nothing on the host is touched) every path this project
installs or creates there. Commands run in that view through ``nsenter``; the network is the
host's, so the shared PostgreSQL, MariaDB and RabbitMQ stay reachable. Everything vanishes
with the holder. Needs root, util-linux's unshare/nsenter and overlayfs.
"""

import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support import services

#: What the project installs or creates under the overlaid trees.
PROJECT_PATHS = ("/etc/ironic-inspection", "/etc/ironic-pxe-filter",
                 "/var/lib/ironic-inspection", "/var/lib/ironic-pxe-filter",
                 "/var/lib/ironic-inspection-dnsmasq", "/run/ironic-inspection-dnsmasq")
OVERLAID = ("/etc", "/var/lib", "/run")

_SETUP = """
set -eu
mount -t tmpfs -o mode=0700 fresh-root "$1"
for tree in {trees}; do
    name=$(echo "$tree" | tr / _)
    up="$1/$name.up" work="$1/$name.work"
    mkdir "$up" "$work"
    mount -t overlay fresh-root -o "lowerdir=$tree,upperdir=$up,workdir=$work" "$tree"
done
rm -rf {paths}
echo ready
exec sleep infinity
"""


class FreshRoot:
    """The holder of the namespace; run commands in it, read its files from outside."""

    def __init__(self, scratch: Path) -> None:
        for tool in ("unshare", "nsenter", "mount"):
            if shutil.which(tool) is None:
                services.unavailable(tool, "install util-linux and mount")
        if os.geteuid() != 0:
            services.unavailable("root", "the fresh-root tests mount overlays (run as root)")
        scratch.mkdir(parents=True, exist_ok=True)
        script = _SETUP.format(trees=" ".join(OVERLAID), paths=" ".join(PROJECT_PATHS))
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script,
             "fresh-root", str(scratch)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.holder.stdout.readline()
        if line.strip() != "ready":
            self.holder.kill()
            _, err = self.holder.communicate(timeout=10)
            services.unavailable("a private mount namespace with overlays", err.strip())
        self.prefix = ["nsenter", f"--target={self.holder.pid}", "--mount", "--"]

    def path(self, inside: str) -> Path:
        """A path of the fresh root, seen from outside (through /proc/PID/root)."""
        return Path(f"/proc/{self.holder.pid}/root") / inside.lstrip("/")

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
        """Run ``argv`` in the fresh root (from /) to completion; output captured as text."""
        return subprocess.run([*self.prefix, *argv], capture_output=True, text=True,
                              timeout=timeout, env=dict(env or os.environ))

    def popen(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              log: Path) -> subprocess.Popen:
        """Start ``argv`` in the fresh root (from /), stdout and stderr into ``log``."""
        with open(log, "ab") as out:
            return subprocess.Popen([*self.prefix, *argv], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=dict(env or os.environ))

    def close(self) -> None:
        """Kill what still runs in the namespace (a failed script's background jobs), then
        the holder: the namespace, its overlays and tmpfs go with the last process."""
        if self.holder.poll() is None:
            namespace = os.readlink(f"/proc/{self.holder.pid}/ns/mnt")
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == self.holder.pid:
                    continue
                try:
                    if os.readlink(entry / "ns" / "mnt") == namespace:
                        os.kill(int(entry.name), signal.SIGKILL)
                except (FileNotFoundError, ProcessLookupError, PermissionError):
                    pass  # gone meanwhile
            self.holder.send_signal(signal.SIGKILL)
        self.holder.communicate(timeout=10)
