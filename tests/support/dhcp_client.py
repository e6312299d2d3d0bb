"""A minimal DHCP client for tests: DHCPDISCOVER with any chaddr, read the DHCPOFFER.

The socket is created inside the client network namespace (from a short-lived thread that
joins it, so the test process itself never changes namespace) and bound to the client
interface. dnsmasq matches ``--dhcp-hostsdir`` files by chaddr, so one socket can ask for any
MAC without creating an interface per MAC. The broadcast flag is set so dnsmasq answers to
the broadcast address: a unicast reply to a MAC that no interface owns would be dropped.
"""

import ctypes
import ipaddress
import os
import random
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from pxe_filter.common.macs import normalize_mac

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
_MAGIC = b"\x63\x82\x53\x63"
_BOOTP = struct.Struct("!BBBBIHH4s4s4s4s16s64s128s")
_DISCOVER, _OFFER = 1, 2
_BROADCAST_FLAG = 0x8000
# dnsmasq answers in well under a millisecond; a request without a reply after this long is
# treated as unanswered. Bounded so a burst never overflows dnsmasq's socket buffer.
_DEFAULT_WINDOW = 32


class DhcpClientError(RuntimeError):
    """The client cannot conclude (e.g. the control MAC got no offer: dnsmasq is not answering)."""


@dataclass(frozen=True)
class Offer:
    """A DHCPOFFER: the offered address and the server that made it."""

    mac: str
    yiaddr: str
    server_id: str | None
    xid: int


def run_in_netns(netns: str, func: Callable[[], T]) -> T:
    """Run ``func`` in a thread that has joined network namespace ``netns``; return its result.

    Sockets created there stay in that namespace after the thread ends. setns() changes only
    the calling thread, and this thread dies right after, so nothing else is affected.
    """
    result: dict[str, object] = {}

    def target() -> None:
        try:
            fd = os.open(os.path.join(NETNS_DIR, netns), os.O_RDONLY | os.O_CLOEXEC)
            try:
                _setns(fd)
            finally:
                os.close(fd)
            result["value"] = func()
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=target, name=f"netns-{netns}", daemon=True)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["value"]  # type: ignore[return-value]


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):  # Python 3.12+
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def build_discover(mac: str, xid: int) -> bytes:
    """A DHCPDISCOVER for ``mac`` with the broadcast flag set, padded to BOOTP's 300 bytes."""
    chaddr = bytes.fromhex(mac.replace(":", "")).ljust(16, b"\0")
    zero = b"\0" * 4
    header = _BOOTP.pack(1, 1, 6, 0, xid, 0, _BROADCAST_FLAG, zero, zero, zero, zero, chaddr,
                         b"", b"")
    options = bytes([53, 1, _DISCOVER, 55, 3, 1, 3, 54, 255])
    return (header + _MAGIC + options).ljust(300, b"\0")


def reply_to(sock: socket.socket, xid: int, timeout: float) -> bytes | None:
    """The first datagram on ``sock`` that answers transaction ``xid`` within ``timeout`` s
    (replies to other transactions are skipped), or None."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(4096)
        except TimeoutError:
            return None
        if len(data) > _BOOTP.size and struct.unpack_from("!I", data, 4)[0] == xid:
            return data
    return None


def parse_offer(data: bytes) -> Offer | None:
    """The Offer in a server reply, or None if ``data`` is not a well-formed DHCPOFFER."""
    if len(data) < _BOOTP.size + 4 or data[0] != 2 or data[_BOOTP.size:_BOOTP.size + 4] != _MAGIC:
        return None
    fields = _BOOTP.unpack_from(data)
    xid, yiaddr, chaddr = fields[4], fields[8], fields[11]
    options = _parse_options(data[_BOOTP.size + 4:])
    if options.get(53) != bytes([_OFFER]):
        return None
    server = options.get(54)
    return Offer(mac=":".join(f"{b:02x}" for b in chaddr[:6]), yiaddr=socket.inet_ntoa(yiaddr),
                 server_id=socket.inet_ntoa(server) if server and len(server) == 4 else None,
                 xid=xid)


def _parse_options(raw: bytes) -> dict[int, bytes]:
    options: dict[int, bytes] = {}
    i = 0
    while i < len(raw):
        code = raw[i]
        if code == 255:
            break
        if code == 0:
            i += 1
            continue
        if i + 1 >= len(raw):
            break
        length = raw[i + 1]
        options[code] = raw[i + 2:i + 2 + length]
        i += 2 + length
    return options


class DhcpClient:
    """Sends DHCPDISCOVERs for arbitrary MACs from ``ifname`` in ``netns`` and collects offers."""

    def __init__(self, netns: str, ifname: str) -> None:
        self.netns = netns
        self.ifname = ifname
        self._sock = run_in_netns(netns, self._open_socket)
        self._lock = threading.Lock()

    def _open_socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, self.ifname.encode())
            sock.bind(("0.0.0.0", 68))
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return sock

    def close(self) -> None:
        """Close the socket."""
        self._sock.close()

    def __enter__(self) -> "DhcpClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def discover(self, mac: str, timeout: float = 1.0, control: str | None = None
                 ) -> Offer | None:
        """Ask for ``mac``; the Offer, or None if no offer came within ``timeout`` seconds.

        With ``control`` (a MAC known to be served), a second DISCOVER for it follows; dnsmasq
        handles packets in order, so once the control's offer is back an unanswered ``mac``
        was refused, and the answer is known without waiting for ``timeout``. If the control
        gets no offer, dnsmasq is not answering and :class:`DhcpClientError` is raised.
        """
        if control is None:
            return self.discover_many([mac], timeout)[normalize_mac(mac)]
        answers = self.discover_many([mac, control], timeout)
        if answers[normalize_mac(control)] is None:
            raise DhcpClientError(f"control MAC {control} got no offer within {timeout}s: "
                                  f"dnsmasq is not answering, cannot judge {mac}")
        return answers[normalize_mac(mac)]

    def discover_many(self, macs: Iterable[str], timeout: float = 1.0,
                      window: int = _DEFAULT_WINDOW) -> dict[str, Offer | None]:
        """Offer (or None) for each MAC, with at most ``window`` requests in flight.

        A request still unanswered when a later request's offer arrives is concluded refused
        (dnsmasq answers in order); the last ones wait up to ``timeout``.
        """
        queue = list(dict.fromkeys(normalize_mac(m) for m in macs))
        answers: dict[str, Offer | None] = {}
        pending: dict[int, tuple[str, float, int]] = {}  # xid -> (mac, sent at, sequence)
        next_index = 0
        with self._lock:
            self._drain()
            while next_index < len(queue) or pending:
                while next_index < len(queue) and len(pending) < window:
                    mac = queue[next_index]
                    xid = random.getrandbits(32)
                    self._sock.sendto(build_discover(mac, xid), ("255.255.255.255", 67))
                    pending[xid] = (mac, time.monotonic(), next_index)
                    next_index += 1
                oldest = min(sent for _, sent, _ in pending.values())
                wait = max(0.0, oldest + timeout - time.monotonic())
                offer = self._receive(wait)
                if offer is not None and offer.xid in pending:
                    mac, _, seq = pending.pop(offer.xid)
                    if offer.mac == mac:
                        answers[mac] = offer
                    for xid, (other, _, other_seq) in list(pending.items()):
                        if other_seq < seq:  # sent earlier, answered never
                            answers.setdefault(other, None)
                            del pending[xid]
                now = time.monotonic()
                for xid, (mac, sent, _) in list(pending.items()):
                    if now - sent >= timeout:
                        answers.setdefault(mac, None)
                        del pending[xid]
        return {mac: answers.get(mac) for mac in queue}

    def _receive(self, wait: float) -> Offer | None:
        readable, _, _ = select.select([self._sock], [], [], wait)
        if not readable:
            return None
        try:
            data = self._sock.recv(4096)
        except BlockingIOError:
            return None
        return parse_offer(data)

    def _drain(self) -> None:
        """Drop late replies to earlier requests so they are not mistaken for new ones."""
        while True:
            try:
                self._sock.recv(4096)
            except BlockingIOError:
                return

    def await_offer(self, mac: str, offered: bool, within: float,
                    control: str | None = None) -> float:
        """Poll until ``mac`` is (``offered``) or is not offered; seconds it took.

        Raises AssertionError if the state is not reached within ``within`` seconds.
        """
        start = time.monotonic()
        while True:
            # An offer comes back in about a millisecond, so short probes poll finely; a
            # refusal without a control MAC can only be judged by waiting longer.
            if offered:
                got = self.discover(mac, timeout=0.02) is not None
            else:
                got = self.discover(mac, timeout=1.0 if control else 0.5,
                                    control=control) is not None
            elapsed = time.monotonic() - start
            if got == offered:
                return elapsed
            if elapsed > within:
                state = "an offer" if offered else "no offer"
                raise AssertionError(f"{mac}: expected {state} within {within}s, "
                                     f"still not after {elapsed:.2f}s")
            time.sleep(0.01)


def same_subnet(address: str, network: str) -> bool:
    """True if ``address`` lies in ``network`` (for asserting offers come from the range)."""
    return ipaddress.ip_address(address) in ipaddress.ip_network(network, strict=False)
