"""DHCPv6 and relayed DHCP against the project's own rendered dnsmasq configuration.

dnsmasq learns a DHCPv6 client's MAC only from the neighbour table (same link) or from a
relay's RFC 6939 option 79; without it no hostsdir entry can match, not even the deny
wildcard. The rendered configuration must then ignore the client (fail closed).

Topology, built once for the module::

    server ns (br0: 198.18.0.1/16, fd00:18::1/64, dnsmasq)
      | veth
    relay ns (cli0: 198.18.0.2/16, fd00:18::2/64; cli1, cli2: direct DHCPv6 clients;
      |        rl0: 198.19.0.1/24, fd00:19::1/64, the relay's client side)
      | veth
    leaf ns (leaf0, leaf1: clients behind the relay)
"""

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from oslo_config import cfg
from scapy.layers.dhcp6 import (
    DUID_LL,
    DHCP6_Advertise,
    DHCP6_RelayForward,
    DHCP6_RelayReply,
    DHCP6_Solicit,
    DHCP6OptBootFileUrl,
    DHCP6OptClientArchType,
    DHCP6OptClientId,
    DHCP6OptClientLinkLayerAddr,
    DHCP6OptElapsedTime,
    DHCP6OptIA_NA,
    DHCP6OptOptReq,
    DHCP6OptRelayMsg,
)

from pxe_filter import conf as filter_conf
from pxe_filter.dnsmasq import config, options, settings
from tests.support import dhcp_client, netns, services
from tests.support.processes import terminate

pytestmark = pytest.mark.netns

ALLOWED, DENIED, UNKNOWN = "52:54:00:bb:00:01", "52:54:00:bb:00:02", "52:54:00:bb:00:03"
WILDCARD_FILE = "unknown_hosts_filter"
BOOT_V6 = "http://[fd00:18::1]:8080/snponly.efi"
SERVER6, RELAY6, LEAF_NET6 = "fd00:18::1", "fd00:18::2", "fd00:19::1"
RELAY4, GIADDR = "198.18.0.2", "198.19.0.1"
#: Seconds a client waits to show it is not answered (dnsmasq answers in milliseconds).
NO_ANSWER = 2.0


class Topology:
    """The three namespaces above; ``leaf`` carries the clients behind the relay."""

    def __init__(self) -> None:
        self.pair = netns.NetnsPair()
        suffix = f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
        # Named like the harness's client namespaces, so sweep_stale() collects leftovers.
        self.leaf = f"{netns.PREFIX}cli-{suffix}"
        self._leaf_created = False
        #: Direct DHCPv6 clients on the server's link (relay ns interfaces), by MAC.
        self.direct: dict[str, str] = {}

    @property
    def relay(self) -> str:
        return self.pair.client

    def create(self) -> "Topology":
        self.pair.create()
        try:
            server, relay = self.pair.server, self.relay
            for ns in (server, relay):
                _sysctls(ns)
            netns.run(["ip", "-n", server, "addr", "add", f"{SERVER6}/64", "dev", netns.BRIDGE,
                       "nodad"])
            netns.run(["ip", "-n", relay, "addr", "add", f"{RELAY4}/16", "dev", "cli0"])
            netns.run(["ip", "-n", relay, "addr", "add", f"{RELAY6}/64", "dev", "cli0",
                       "nodad"])
            netns.run(["ip", "-n", server, "route", "add", "198.19.0.0/24", "via", RELAY4])
            netns.run(["ip", "-n", server, "route", "add", "fd00:19::/64", "via", RELAY6])
            netns.run(["ip", "netns", "add", self.leaf])
            self._leaf_created = True
            _sysctls(self.leaf)
            netns.run(["ip", "-n", self.leaf, "link", "set", "lo", "up"])
            netns.run(["ip", "link", "add", "rl0", "netns", relay, "type", "veth", "peer",
                       "name", "leaf0", "netns", self.leaf])
            netns.run(["ip", "-n", relay, "addr", "add", f"{GIADDR}/24", "dev", "rl0"])
            netns.run(["ip", "-n", relay, "addr", "add", f"{LEAF_NET6}/64", "dev", "rl0",
                       "nodad"])
            for ns, ifname in ((relay, "rl0"), (self.leaf, "leaf0")):
                netns.run(["ip", "netns", "exec", ns, "ethtool", "-K", ifname, "tx", "off"])
                netns.run(["ip", "-n", ns, "link", "set", ifname, "up"])
        except BaseException:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        if self._leaf_created:
            subprocess.run(["ip", "netns", "delete", self.leaf], capture_output=True, timeout=10)
        self.pair.destroy()


def _wait_link_local(ns: str, ifname: str, timeout: float = 5.0) -> None:
    """Wait until ``ifname`` has a usable IPv6 link-local address (dhclient -6 needs one)."""
    deadline = time.monotonic() + timeout
    while True:
        out = netns.run(["ip", "-n", ns, "-6", "addr", "show", "dev", ifname, "scope", "link"])
        if "inet6" in out and "tentative" not in out:
            return
        if time.monotonic() > deadline:
            raise netns.HarnessError(f"no IPv6 link-local address on {ifname} in {ns}: {out}")
        time.sleep(0.05)


def _sysctls(ns: str) -> None:
    # No duplicate address detection (addresses usable at once), forwarding in the relay.
    for key in ("net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
                "net.ipv6.conf.all.forwarding=1", "net.ipv4.ip_forward=1"):
        netns.run(["ip", "netns", "exec", ns, "sysctl", "-qw", key])


@pytest.fixture(scope="module")
def topo() -> Iterator[Topology]:
    reason = netns.missing_prerequisites()
    if reason:
        services.unavailable("real DHCP (network namespaces)", reason)
    netns.sweep_stale()
    try:
        topology = Topology().create()
    except netns.HarnessError as exc:
        services.unavailable("real DHCP (network namespaces)", exc)
    # Direct DHCPv6 clients on the server's link, each with a MAC of its own.
    topology.direct = {mac: topology.pair.add_client_interface(mac) for mac in (DENIED, UNKNOWN)}
    for ns, ifname in [(topology.relay, name) for name in topology.direct.values()] + [
            (topology.relay, "rl0"), (topology.leaf, "leaf0")]:
        _wait_link_local(ns, ifname)
    yield topology
    topology.destroy()


def _render(tmp_path: Path, dhcp_ranges: list[str], range_v6: str) -> Path:
    """The project's configuration for the harness bridge, as an operator would render it."""
    conf = cfg.ConfigOpts()
    filter_conf.register_opts(conf)
    options.register_opts(conf)
    conf([], default_config_files=[], default_config_dirs=[])
    conf.set_override("dhcp_hostsdir", str(tmp_path / "hostsdir"), group="pxe_filter")
    for name, value in {
            "interface": netns.BRIDGE, "dhcp_ranges": dhcp_ranges, "dhcp_range_v6": range_v6,
            "no_ping": True, "leasefile": str(tmp_path / "leases"),
            "pid_file": str(tmp_path / "dnsmasq.pid"), "log_facility": "-",
            "ipv6_bootfile_url": BOOT_V6}.items():
        conf.set_override(name, value, group="dnsmasq")
    target = tmp_path / "dnsmasq.conf"
    config.install(config.render(settings.from_conf(conf)), str(target))
    return target


class Server:
    """dnsmasq in the server namespace running the rendered file, and its hostsdir."""

    def __init__(self, topo: Topology, workdir: Path, ranges: list[str], range_v6: str):
        self.hostsdir = workdir / "hostsdir"
        self.hostsdir.mkdir()
        self.verdicts(unknown=False, **{ALLOWED: True, DENIED: False})
        conf_file = _render(workdir, ranges, range_v6)
        self.proc = netns.Dnsmasq.for_conf_file(topo.pair, workdir / "run", conf_file).start()

    def verdicts(self, unknown: bool | None = None, **macs: bool) -> None:
        """Write allow/deny files as the filter does (dotfile renamed over the target)."""
        entries = dict(macs)
        if unknown is not None:
            entries[WILDCARD_FILE] = unknown
        for name, allow in entries.items():
            mac = "*:*:*:*:*:*" if name == WILDCARD_FILE else name
            tmp = self.hostsdir / f".{name}.tmp"
            tmp.write_text(f"{mac}\n" if allow else f"{mac},ignore\n")
            tmp.rename(self.hostsdir / name)

    def stop(self) -> None:
        self.proc.stop()


@pytest.fixture(scope="module")
def server_factory(topo: Topology, tmp_path_factory) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(ranges: list[str], range_v6: str) -> Server:
        for old in servers:
            old.stop()
        server = Server(topo, tmp_path_factory.mktemp("dnsmasq"), ranges, range_v6)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# --- DHCPv6 messages, crafted with scapy -------------------------------------------------

def _solicit(mac: str, arch: int = 7) -> bytes:
    return bytes(DHCP6_Solicit(trid=int(time.monotonic_ns()) & 0xFFFFFF)
                 / DHCP6OptClientId(duid=DUID_LL(lladdr=mac)) / DHCP6OptElapsedTime()
                 / DHCP6OptIA_NA(iaid=1) / DHCP6OptOptReq(reqopts=[59])
                 / DHCP6OptClientArchType(archtypes=[arch]))


def _relayed_solicit(ns: str, mac: str, with_option_79: bool) -> dict[str, object] | None:
    """A relay's RELAY-FORW of ``mac``'s SOLICIT; the ADVERTISE inside the reply, or None."""
    lladdr = "fe80::5054:ff:feff:" + mac[-5:].replace(":", "")
    packet = DHCP6_RelayForward(hopcount=0, linkaddr=LEAF_NET6, peeraddr=lladdr)
    if with_option_79:
        packet /= DHCP6OptClientLinkLayerAddr(lltype=1, clladdr=mac)
    packet /= DHCP6OptRelayMsg(message=DHCP6_Solicit(_solicit(mac)))

    def exchange() -> bytes | None:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
            sock.bind((RELAY6, 547))
            sock.settimeout(1.0)
            sock.sendto(bytes(packet), (SERVER6, 547))
            try:
                return sock.recv(4096)
            except TimeoutError:
                return None

    data = dhcp_client.run_in_netns(ns, exchange)
    if data is None:
        return None
    reply = DHCP6_RelayReply(data)
    inner = reply[DHCP6OptRelayMsg].message
    if not isinstance(inner, DHCP6_Advertise):
        return None
    url = inner[DHCP6OptBootFileUrl].optdata.decode() if DHCP6OptBootFileUrl in inner else ""
    return {"bootfile": url}


# --- a real DHCPv6 client ----------------------------------------------------------------

def _dhclient6(ns: str, ifname: str, workdir: Path, wait: float) -> bool:
    """Run ISC dhclient -6 on ``ifname``; True once it has a lease (within ``wait`` s)."""
    workdir.mkdir(parents=True, exist_ok=True)
    lease = workdir / f"{ifname}.leases"
    lease.unlink(missing_ok=True)
    argv = ["ip", "netns", "exec", ns, "dhclient", "-6", "-1", "-d", "-cf", "/dev/null",
            "-sf", "/bin/true", "-lf", str(lease), "-pf", str(workdir / f"{ifname}.pid"),
            "-D", "LL", ifname]
    with open(workdir / f"{ifname}.log", "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if lease.exists() and "iaaddr" in lease.read_text():
                return True
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        return lease.exists() and "iaaddr" in lease.read_text()
    finally:
        proc.kill()
        proc.wait(timeout=5)


def _set_mac(ns: str, ifname: str, mac: str) -> None:
    # A new MAC gives a new link-local address once the link is back up.
    netns.run(["ip", "-n", ns, "link", "set", ifname, "down"])
    netns.run(["ip", "-n", ns, "link", "set", ifname, "address", mac])
    netns.run(["ip", "-n", ns, "link", "set", ifname, "up"])
    _wait_link_local(ns, ifname)


# --- tests -------------------------------------------------------------------------------

def test_dhcpv6_on_the_link_follows_the_hostsdir(topo, server_factory, tmp_path):
    """A real dhclient -6 on the server's link: allow, deny, the unknown-MAC wildcard, flips."""
    server = server_factory([f"{netns.RANGE_START},{netns.RANGE_END},{netns.NETMASK}"],
                            "fd00:18::100,fd00:18::1ff,64")
    direct = topo.direct
    assert not _dhclient6(topo.relay, direct[DENIED], tmp_path, wait=NO_ANSWER), \
        server.proc.log_text()[-3000:]
    assert not _dhclient6(topo.relay, direct[UNKNOWN], tmp_path, wait=NO_ANSWER)
    # Flips while dnsmasq runs: the denied MAC allowed, unknown MACs allowed.
    server.verdicts(**{DENIED: True})
    assert _dhclient6(topo.relay, direct[DENIED], tmp_path, wait=8), \
        server.proc.log_text()[-3000:]
    server.verdicts(unknown=True)
    assert _dhclient6(topo.relay, direct[UNKNOWN], tmp_path, wait=8)
    server.verdicts(unknown=False)
    assert not _dhclient6(topo.relay, direct[UNKNOWN], tmp_path, wait=NO_ANSWER)


def test_relayed_dhcpv6_is_served_only_when_the_mac_is_known_and_allowed(
        topo, server_factory):
    """RELAY-FORW with and without RFC 6939 option 79: without it, nobody is served."""
    server = server_factory([f"{netns.RANGE_START},{netns.RANGE_END},{netns.NETMASK}"],
                            "fd00:19::100,fd00:19::1ff,64")
    served = _relayed_solicit(topo.relay, ALLOWED, with_option_79=True)
    assert served is not None, server.proc.log_text()[-3000:]
    assert served["bootfile"] == BOOT_V6
    assert _relayed_solicit(topo.relay, DENIED, with_option_79=True) is None
    assert _relayed_solicit(topo.relay, UNKNOWN, with_option_79=True) is None
    # Without option 79 dnsmasq cannot know the MAC: fail closed, even for an allowed one.
    for mac in (ALLOWED, DENIED, UNKNOWN):
        assert _relayed_solicit(topo.relay, mac, with_option_79=False) is None, mac
    server.verdicts(unknown=True)
    assert _relayed_solicit(topo.relay, UNKNOWN, with_option_79=True) is not None
    assert _relayed_solicit(topo.relay, DENIED, with_option_79=True) is None
    assert _relayed_solicit(topo.relay, UNKNOWN, with_option_79=False) is None
    server.verdicts(unknown=False, **{DENIED: True})
    assert _relayed_solicit(topo.relay, DENIED, with_option_79=True) is not None
    assert _relayed_solicit(topo.relay, UNKNOWN, with_option_79=True) is None


def test_dnsmasq_relay_in_front_serves_allowed_machines(topo, server_factory, tmp_path):
    """dnsmasq's own --dhcp-relay sends option 79: a real dhclient -6 behind it."""
    server = server_factory([f"{netns.RANGE_START},{netns.RANGE_END},{netns.NETMASK}"],
                            "fd00:19::100,fd00:19::1ff,64")
    relay = subprocess.Popen(topo.pair.exec_argv(topo.relay, [
        "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--pid-file=",
        f"--dhcp-relay={LEAF_NET6},{SERVER6}", "--log-dhcp", "--log-facility=-"]),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Served first: that proves the relay is up before anything is expected unanswered.
        _set_mac(topo.leaf, "leaf0", ALLOWED)
        assert _dhclient6(topo.leaf, "leaf0", tmp_path, wait=8), server.proc.log_text()[-3000:]
        _set_mac(topo.leaf, "leaf0", DENIED)
        assert not _dhclient6(topo.leaf, "leaf0", tmp_path, wait=NO_ANSWER)
        _set_mac(topo.leaf, "leaf0", UNKNOWN)
        assert not _dhclient6(topo.leaf, "leaf0", tmp_path, wait=NO_ANSWER)
        server.verdicts(unknown=True)
        assert _dhclient6(topo.leaf, "leaf0", tmp_path, wait=8)
    finally:
        server.verdicts(unknown=False)
        terminate(relay, 5)


def _relayed_discover(ns: str, mac: str) -> str | None:
    """A DHCPv4 DISCOVER relayed with giaddr set, sent from the relay; the offered address."""
    xid = int(time.monotonic_ns() & 0x7FFFFFFF)
    packet = bytearray(dhcp_client.build_discover(mac, xid))
    packet[3] = 1  # hops
    packet[24:28] = socket.inet_aton(GIADDR)

    def exchange() -> bytes | None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind((GIADDR, 67))
            sock.sendto(bytes(packet), (netns.SERVER_IP, 67))
            return dhcp_client.reply_to(sock, xid, 1.0)

    data = dhcp_client.run_in_netns(ns, exchange)
    offer = dhcp_client.parse_offer(data) if data else None
    return offer.yiaddr if offer else None


def test_relayed_dhcpv4_follows_the_hostsdir(topo, server_factory):
    """giaddr-relayed DISCOVERs are filtered by chaddr like direct ones, flips included."""
    server = server_factory([f"{netns.RANGE_START},{netns.RANGE_END},{netns.NETMASK}",
                             "198.19.0.10,198.19.0.200,255.255.255.0"],
                            "fd00:18::100,fd00:18::1ff,64")
    offered = _relayed_discover(topo.relay, ALLOWED)
    assert offered is not None and offered.startswith("198.19.0."), \
        server.proc.log_text()[-3000:]
    assert _relayed_discover(topo.relay, DENIED) is None
    assert _relayed_discover(topo.relay, UNKNOWN) is None
    server.verdicts(unknown=True)
    assert _relayed_discover(topo.relay, UNKNOWN) is not None
    server.verdicts(unknown=False, **{DENIED: True, ALLOWED: False})
    assert _relayed_discover(topo.relay, DENIED) is not None
    assert _relayed_discover(topo.relay, ALLOWED) is None
    assert _relayed_discover(topo.relay, UNKNOWN) is None
