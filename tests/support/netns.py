"""Real DHCP for tests: two network namespaces joined by veth, and dnsmasq in one of them.

The server namespace holds a bridge ``br0`` (198.18.0.1/16, RFC 2544 benchmark space that
never leaves these namespaces) with the server end of every veth pair enslaved; dnsmasq serves
``br0``. The client namespace holds the other ends (``cli0``, ``cli1``...), each with its own
MAC, for real clients such as busybox udhcpc; :class:`tests.support.dhcp_client.DhcpClient`
asks for arbitrary MACs from ``cli0`` without creating interfaces. TX checksum offload is
off on every veth end, or clients drop the replies.

Names carry the creating process id and a random suffix, so parallel sessions never collide,
and :func:`sweep_stale` removes what a killed session left behind.
"""

import ctypes
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

PREFIX = "pxf-"
SERVER_IP = "198.18.0.1"
PREFIXLEN = 16
RANGE_START, RANGE_END, NETMASK = "198.18.1.1", "198.18.255.254", "255.255.0.0"
BRIDGE = "br0"
REQUIRED_TOOLS = ("ip", "ethtool", "dnsmasq")
_NAME = re.compile(rf"{PREFIX}(?:srv|cli)-(\d+)-[0-9a-f]+")
_PR_SET_PDEATHSIG = 1


class HarnessError(RuntimeError):
    """Setting up namespaces or dnsmasq failed; the message has the command and its output."""


def missing_prerequisites() -> str | None:
    """Why real DHCP cannot run here (not root, a tool missing), or None if it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        return f"missing tools: {', '.join(missing)} (Debian: iproute2 ethtool dnsmasq-base)"
    return None


def run(argv: Sequence[str], timeout: float = 10) -> str:
    """Run a command, returning stdout; HarnessError with its stderr if it fails."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessError(f"{' '.join(argv)}: {exc}") from None
    if proc.returncode != 0:
        raise HarnessError(f"{' '.join(argv)} exited {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


class NetnsPair:
    """A server and a client namespace joined by veth pairs through a bridge on the server side."""

    def __init__(self) -> None:
        suffix = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.server = f"{PREFIX}srv-{suffix}"
        self.client = f"{PREFIX}cli-{suffix}"
        self.server_ip = SERVER_IP
        self.server_if = BRIDGE
        self.client_ifs: list[str] = []
        self._created: list[str] = []

    @property
    def client_if(self) -> str:
        """The first client interface (the one DhcpClient uses by default)."""
        return self.client_ifs[0]

    def create(self) -> "NetnsPair":
        """Create both namespaces, the bridge and the first veth pair; undo all on failure."""
        try:
            for name in (self.server, self.client):
                run(["ip", "netns", "add", name])
                self._created.append(name)
            for ns in (self.server, self.client):
                run(["ip", "-n", ns, "link", "set", "lo", "up"])
            run(["ip", "-n", self.server, "link", "add", BRIDGE, "type", "bridge",
                 "stp_state", "0", "forward_delay", "0"])
            run(["ip", "-n", self.server, "addr", "add", f"{SERVER_IP}/{PREFIXLEN}",
                 "dev", BRIDGE])
            run(["ip", "-n", self.server, "link", "set", BRIDGE, "up"])
            self.add_client_interface()
        except BaseException:
            self.destroy()
            raise
        return self

    def add_client_interface(self, mac: str | None = None) -> str:
        """Add a veth pair (client end with ``mac`` if given); return the client end's name."""
        index = len(self.client_ifs)
        client_if, server_if = f"cli{index}", f"srv{index}"
        # Created directly inside the namespaces: no name ever exists in the host namespace.
        argv = ["ip", "link", "add", server_if, "netns", self.server, "type", "veth",
                "peer", "name", client_if, "netns", self.client]
        if mac:
            argv[-2:-2] = ["address", mac]
        run(argv)
        run(["ip", "netns", "exec", self.server, "ethtool", "-K", server_if, "tx", "off"])
        run(["ip", "netns", "exec", self.client, "ethtool", "-K", client_if, "tx", "off"])
        run(["ip", "-n", self.server, "link", "set", server_if, "master", BRIDGE, "up"])
        run(["ip", "-n", self.client, "link", "set", client_if, "up"])
        self.client_ifs.append(client_if)
        return client_if

    def client_mac(self, ifname: str) -> str:
        """The MAC address of a client interface."""
        out = run(["ip", "-n", self.client, "-o", "link", "show", ifname])
        match = re.search(r"link/ether ([0-9a-f:]{17})", out)
        if not match:
            raise HarnessError(f"no MAC on {ifname}: {out.strip()}")
        return match.group(1)

    def exec_argv(self, namespace: str, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped to run inside ``namespace`` (``ip netns exec`` execs in place)."""
        return ["ip", "netns", "exec", namespace, *argv]

    def destroy(self) -> None:
        """Delete the namespaces (their interfaces go with them); never raises."""
        for name in reversed(self._created):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10)
        self._created.clear()


def sweep_stale() -> list[str]:
    """Delete namespaces of this harness whose creating process is gone; return their names."""
    removed = []
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return removed
    for name in names:
        match = _NAME.fullmatch(name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10)
            removed.append(name)
    return removed


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM if the test process dies (even by SIGKILL)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Dnsmasq:
    """A dnsmasq process in the server namespace, its output captured in ``workdir``."""

    def __init__(self, net: NetnsPair, workdir: Path, argv: Sequence[str]) -> None:
        self.net = net
        self.workdir = workdir
        self.argv = list(argv)
        self.log_path = workdir / "dnsmasq.log"
        self.proc: subprocess.Popen | None = None

    @classmethod
    def for_hostsdir(cls, net: NetnsPair, workdir: Path, hostsdir: Path,
                     extra_args: Sequence[str] = (), user: str = "root") -> "Dnsmasq":
        """dnsmasq for inspection DHCP on the bridge, filtered by ``hostsdir``.

        Runs as root by default because pytest's temporary directories are mode 0700; pass
        ``user`` (e.g. "nobody") to test file permissions as a real deployment would.
        """
        argv = ["dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0",
                "--bind-interfaces", f"--interface={net.server_if}",
                f"--dhcp-range={RANGE_START},{RANGE_END},{NETMASK},10m",
                f"--dhcp-hostsdir={hostsdir}", "--no-ping",
                f"--dhcp-leasefile={workdir / 'dnsmasq.leases'}",
                f"--pid-file={workdir / 'dnsmasq.pid'}",
                "--log-dhcp", "--log-facility=-", f"--user={user}", *extra_args]
        return cls(net, workdir, argv)

    @classmethod
    def for_conf_file(cls, net: NetnsPair, workdir: Path, conf_file: Path,
                      extra_args: Sequence[str] = ()) -> "Dnsmasq":
        """dnsmasq running a caller-rendered configuration file (kept in the foreground)."""
        argv = ["dnsmasq", "--no-daemon", f"--conf-file={conf_file}", *extra_args]
        return cls(net, workdir, argv)

    @property
    def pid(self) -> int:
        """The dnsmasq process id (``ip netns exec`` replaces itself with dnsmasq)."""
        if self.proc is None:
            raise HarnessError("dnsmasq is not started")
        return self.proc.pid

    def start(self, timeout: float = 5.0) -> "Dnsmasq":
        """Start dnsmasq and wait until its DHCP socket is bound (hostsdir already read)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.net.exec_argv(self.net.server, self.argv),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while not self._dhcp_bound():
            if self.proc.poll() is not None:
                raise HarnessError(f"dnsmasq exited {self.proc.returncode} at start:\n"
                                   f"{self.log_text()}")
            if time.monotonic() > deadline:
                self.stop()
                raise HarnessError(f"dnsmasq did not bind UDP port 67 within {timeout}s:\n"
                                   f"{self.log_text()}")
            time.sleep(0.01)
        return self

    def _dhcp_bound(self) -> bool:
        # /proc/PID/net/udp lists the sockets of PID's network namespace. dnsmasq reads the
        # hostsdir before its main loop, so a request queued on the bound socket is judged
        # by the files present at start.
        # Until ``ip`` has joined the namespace and exec'd dnsmasq, /proc/PID/net is the
        # host's, where something else may own port 67.
        try:
            if Path(f"/proc/{self.pid}/comm").read_text().strip() != "dnsmasq":
                return False
            table = Path(f"/proc/{self.pid}/net/udp").read_text()
        except OSError:
            return False
        return any(line.split()[1].endswith(":0043") for line in table.splitlines()[1:])

    def running(self) -> bool:
        """True while the process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def sighup(self) -> None:
        """Make dnsmasq re-read its hostsdir (and lease file) from scratch."""
        os.kill(self.pid, signal.SIGHUP)

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit status (None if never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        return self.proc.returncode

    def log_text(self) -> str:
        """Everything dnsmasq logged so far (with ``--log-dhcp``, every request and answer)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, pattern: str, timeout: float = 5.0) -> re.Match:
        """Wait until the log matches regular expression ``pattern``; the match."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern, re.MULTILINE)
        while True:
            match = regex.search(self.log_text())
            if match:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"dnsmasq log has no {pattern!r} after {timeout}s:\n"
                                     f"{self.log_text()[-4000:]}")
            time.sleep(0.02)

    def udp_receive_errors(self) -> int:
        """UDP datagrams dropped in the server namespace for a full buffer (0 when healthy)."""
        lines = Path(f"/proc/{self.pid}/net/snmp").read_text().splitlines()
        header, values = [line.split() for line in lines if line.startswith("Udp:")][:2]
        return int(values[header.index("RcvbufErrors")])
