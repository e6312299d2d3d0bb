"""sd_notify(3) over the datagram socket systemd names in $NOTIFY_SOCKET.

A few lines of protocol, so no dependency on libsystemd. Without $NOTIFY_SOCKET (not under
systemd) every call is a no-op.
"""

import contextlib
import os
import socket


def notify(*fields: str) -> None:
    """Send ``KEY=value`` fields (e.g. ``READY=1``, ``STATUS=...``); a failure is ignored."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    message = "\n".join(fields).encode()
    # Non-blocking: a receiver that stops reading (queue of net.unix.max_dgram_qlen,
    # 10 by default) must never freeze the service; the message is dropped instead.
    with contextlib.suppress(OSError), socket.socket(
            socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK) as sock:
        sock.connect(address)
        sock.sendall(message)


def watchdog_interval() -> float | None:
    """Seconds between WATCHDOG=1 pings systemd expects (half its timeout), or None."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid.isdigit() and int(pid) != os.getpid()):
        return None
    try:
        return max(int(usec) / 2_000_000, 0.1)
    except ValueError:
        return None
