"""dnsmasq's own answers: every lease it grants, reported to the filter through a spool.

The rendered dnsmasq configuration runs :func:`script` (``dhcp-script``) for each lease event.
For a lease granted or renewed it writes one line, ``<epoch> <action> <MAC> <address>``, to
a dotfile in the spool directory and renames it to its final name, so the filter never reads
half a report. Files, not a socket: dnsmasq may run in a container or another network
namespace, and a report written while the filter is down waits for it. dnsmasq learns a
DHCPv6 client's MAC from the neighbour table or the relay (``DNSMASQ_MAC``); a DHCPv6 lease
whose MAC it does not know is reported with ``-`` and only recorded by its address.

:class:`LeaseBook` keeps each MAC's last DHCP (time, address), bounded in memory, and
persists it as JSON beside the daemon's status file for ``ironic-pxe-filter explain``.
"""

import collections
import contextlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from pxe_filter.common import macs
from pxe_filter.status.command import load as load_object
from pxe_filter.status.recorder import FileWriter

LOG = logging.getLogger(__name__)

#: Reports read per pass: a burst of thousands of leases is spread over a few passes.
MAX_PER_PASS = 2000
#: Largest report file read; a report is one short line.
_MAX_REPORT = 512
#: MACs whose last DHCP is kept (about 150 bytes each).
CAPACITY = 100_000


def script(spool: str) -> str:
    """The ``dhcp-script`` that reports each granted or renewed lease into ``spool``.

    ``spool`` is a validated absolute path (no quote can appear in it). ``old`` events
    dnsmasq makes for every lease it reads from its lease file at start-up carry
    ``DNSMASQ_DATA_MISSING``: those were not granted now and are not reported.
    """
    return f"""#!/bin/sh
# Rendered by ironic-pxe-filter render-dnsmasq-config: reports every lease dnsmasq grants
# to ironic-pxe-filter (dhcp-script). Replaced on the next render.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
case "$1" in add|old) ;; *) exit 0 ;; esac
[ -n "$DNSMASQ_DATA_MISSING" ] && exit 0
spool='{spool}'
mac="${{DNSMASQ_MAC:-}}"
case "$3" in *:*) ;; *) mac="${{mac:-$2}}" ;; esac
now=$(date +%s)
tmp="$spool/.$$.tmp"
printf '%s %s %s %s\\n' "$now" "$1" "${{mac:--}}" "$3" > "$tmp" && mv -f "$tmp" "$spool/$now.$$"
exit 0
"""


@dataclass(frozen=True)
class Lease:
    """One lease dnsmasq reported: when (epoch seconds), which MAC (None if unknown), the
    address, and ``add`` (new) or ``old`` (renewed)."""

    time: float
    action: str
    mac: str | None
    address: str


def parse(line: str) -> Lease | None:
    """A report line as :class:`Lease`; None if it is not one."""
    parts = line.split()
    if len(parts) != 4 or parts[1] not in ("add", "old") or len(parts[3]) > 64:
        return None
    try:
        when = float(parts[0])
    except ValueError:
        return None
    mac = None
    with contextlib.suppress(macs.InvalidMAC):
        mac = macs.normalize_mac(parts[2])
    return Lease(when, parts[1], mac, parts[3])


def read_spool(path: str, limit: int = MAX_PER_PASS) -> list[Lease]:
    """Read and delete up to ``limit`` reports from ``path``, oldest first; dotfiles are
    reports being written. A missing directory is no report (logged once by the caller)."""
    try:
        names = sorted((entry.name for entry in os.scandir(path)
                        if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False)),
                       key=_age)[:limit]
    except FileNotFoundError:
        return []
    leases = []
    for name in names:
        full = os.path.join(path, name)
        try:
            with open(full, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as stream:
                data = stream.read(_MAX_REPORT)
        except OSError as exc:
            LOG.debug("Cannot read lease report %s: %s", full, exc)
            data = b""
        with contextlib.suppress(OSError):
            os.unlink(full)
        for line in data.decode(errors="replace").splitlines():
            lease = parse(line)
            if lease is None:
                LOG.warning("Ignoring a malformed lease report in %s: %r", path, line[:80])
            else:
                leases.append(lease)
    return leases


def _age(name: str) -> tuple[int, str]:
    head = name.split(".", 1)[0]
    return (int(head) if head.isdigit() else 0, name)


class LeaseBook:
    """Each MAC's last DHCP (time, address): the newest :data:`CAPACITY` kept, saved to path."""

    def __init__(self, path: str | None, dir_fd: Callable[[], int] | None = None) -> None:
        message = "Cannot save the last DHCP of each MAC to %s: %s"
        self._file = FileWriter(path, message, dir_fd) if path else None
        self._last: collections.OrderedDict[str, tuple[float, str]] = collections.OrderedDict()
        self._dirty = False
        if path:
            for mac, entry in load(path).items():
                self._last[mac] = (entry["time"], entry["address"])

    def record(self, lease: Lease) -> None:
        """Remember ``lease`` as its MAC's last DHCP."""
        if lease.mac is None:
            return
        self._last[lease.mac] = (lease.time, lease.address)
        self._last.move_to_end(lease.mac)
        while len(self._last) > CAPACITY:
            self._last.popitem(last=False)
        self._dirty = True

    def save(self) -> None:
        """Write the book if it changed (a failure logged once, never raised)."""
        if self._file and self._dirty:
            data = {mac: {"time": at, "address": address}
                    for mac, (at, address) in self._last.items()}
            self._dirty = not self._file.write(json.dumps(data).encode())


def load(path: str) -> dict[str, dict]:
    """A saved book (``{mac: {"time", "address"}}``); empty if missing or unreadable."""
    try:
        data = load_object(path)
    except (OSError, ValueError):
        return {}
    return {mac: entry for mac, entry in data.items()
            if isinstance(entry, dict) and isinstance(entry.get("time"), (int, float))
            and isinstance(entry.get("address"), str) and macs.is_canonical(mac)}


def book_path(status_path: str) -> str:
    """Where the daemon saves its lease book: beside its status file."""
    directory, name = os.path.split(status_path)
    return os.path.join(directory, ".ironic-pxe-filter.leases.json" if name.startswith(".")
                        else "ironic-pxe-filter.leases.json")
