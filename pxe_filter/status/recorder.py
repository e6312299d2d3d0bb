"""The daemon's figures as a JSON state file, written atomically, read by ``status``.

Written after every sync, broadcast, repair and dnsmasq event. The default path is a dotfile
in the hostsdir, which dnsmasq ignores and which the service may always write; it is then
written relative to the hostsdir the daemon holds open, never through a swapped path. On a
full disk it is overwritten in place (padded with spaces, which JSON ignores).
"""

import datetime
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pxe_filter.common.config import ConfigError
from pxe_filter.hostsdir import overwrite, replace_file

LOG = logging.getLogger(__name__)

STATE_NAME = ".ironic-pxe-filter.status.json"
FORMAT_VERSION = 1


def path_of(conf) -> str:
    """Where the state file is: ``[pxe_filter]state_file``, else STATE_NAME in the hostsdir;
    raises ConfigError when neither is set."""
    if conf.pxe_filter.state_file:
        return conf.pxe_filter.state_file
    if not conf.pxe_filter.dhcp_hostsdir:
        raise ConfigError("set [pxe_filter]dhcp_hostsdir (or [pxe_filter]state_file)")
    return os.path.join(os.path.abspath(conf.pxe_filter.dhcp_hostsdir), STATE_NAME)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class StatusRecorder:
    """Collects the figures and writes them; thread-safe (RPC threads, watcher, main loop)."""

    def __init__(self, path: str, hostsdir: str,
                 figures: Callable[[], tuple[int, int, bool | None]],
                 dnsmasq: Callable[[], dict[str, object]],
                 dir_fd: Callable[[], int] | None = None) -> None:
        self._file = FileWriter(path, "Cannot write the state file %s: %s", dir_fd,
                                in_place=True)
        self._figures = figures
        self._dnsmasq = dnsmasq
        #: Counts of Ironic notifications (received, applied, ignored: why), when followed.
        self.notification_counts: Callable[[], dict[str, int]] | None = None
        #: Which nodes the filter serves, one line (its [pxe_filter] scope options).
        self.scope: Callable[[], str] | None = None
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()  # one writer of the temporary file at a time
        self.data: dict[str, Any] = {
            "format": FORMAT_VERSION, "pid": os.getpid(), "running": True,
            "started_at": _now(), "hostsdir": hostsdir, "ready": False,
            "last_sync": None, "syncs": 0, "last_broadcast": None, "broadcasts": 0,
            "repaired": 0, "last_repair": None,
            "fail_closed": False, "fail_closed_reason": None,
            "errors": {"count": 0, "last": None, "last_at": None},
            "dnsmasq_events": {"reloads": 0, "last_reload": None, "last_reload_reason": None,
                               "restarts": 0, "last_restart": None},
        }

    def _record(self, count: str | None = None, by: int = 1, part: str | None = None,
                write: bool = True, **fields: object) -> None:
        """Add ``by`` to figure ``count`` and set ``fields`` (in the dict ``part`` of the
        figures when given), under the lock; then write the file."""
        with self._lock:
            data = self.data[part] if part else self.data
            if count:
                data[count] += by
            data.update(fields)
        if write:
            self.write()

    def sync(self, result, first: bool = False) -> None:
        """Record a full sync (a pxe_filter.sync.SyncResult)."""
        if result.failed:
            self.error(f"{result.failed} file(s) could not be written in the last sync")
        self._record("syncs", ready=True, last_sync={
            "at": _now(), "duration_s": round(result.duration, 3), "first": first,
            "written": result.written, "failed": result.failed,
            "purged": result.purged, "invalid_macs": result.invalid})

    def broadcast(self, result) -> None:
        """Record a broadcast (a pxe_filter.sync.SyncResult)."""
        self._record("broadcasts", last_broadcast={
            "at": _now(), "allowed": result.allowed, "denied": result.denied,
            "rejected": result.rejected, "written": result.written, "failed": result.failed})

    def repaired(self, names: list[str]) -> None:
        """Record files put back by self-healing."""
        if names:
            self._record("repaired", len(names), last_repair={
                "at": _now(), "files": sorted(names)[:20], "count": len(names)})

    def dnsmasq_event(self, kind: str, reason: str) -> None:
        """Record a dnsmasq reload or restart (``kind`` is "reload" or "restart")."""
        fields = {f"last_{kind}": _now()}
        if kind == "reload":
            fields["last_reload_reason"] = reason
        self._record(f"{kind}s", part="dnsmasq_events", **fields)

    def error(self, message: str, write: bool = False) -> None:
        """Count an error and keep its message."""
        self._record("count", part="errors", write=write, last=message, last_at=_now())

    def set_fail_closed(self, reason: str | None) -> None:
        """Record that the daemon fails closed (``reason``) or no longer does (None)."""
        self._record(fail_closed=reason is not None, fail_closed_reason=reason)

    def stopped(self) -> None:
        """Mark the daemon stopped (clean shutdown)."""
        self._record(running=False, stopped_at=_now())

    def snapshot(self) -> dict[str, object]:
        """The figures as written (counts and dnsmasq state fetched now)."""
        allowed, denied, unknown = self._figures()
        try:
            dnsmasq = self._dnsmasq()
        except Exception as exc:  # a control that cannot describe itself: say so, go on
            dnsmasq = {"error": str(exc)}
        with self._lock:
            data = json.loads(json.dumps(self.data))
        data.update(allowed=allowed, denied=denied, updated_at=_now(),
                    updated_epoch=round(time.time(), 3),
                    wildcard=None if unknown is None else ("allow" if unknown else "deny"))
        data["dnsmasq"] = {**dnsmasq, **data.pop("dnsmasq_events")}
        if self.scope is not None:
            data["scope"] = self.scope()
        if self.notification_counts is not None:
            data["notifications"] = dict(sorted(self.notification_counts().items()))
        return data

    def write(self) -> None:
        """Write the state file (0644); a failure is logged once, not raised."""
        with self._io_lock:
            self._file.write((json.dumps(self.snapshot(), indent=1, sort_keys=True)
                              + "\n").encode())


@dataclass
class FileWriter:
    """Writes one of the daemon's own files (its state file, its lease book) atomically with
    :func:`replace_file`: relative to the held hostsdir (``dir_fd``, asked each time: a
    restored hostsdir is held by a new descriptor) when it is the default dotfile there,
    never through a path swapped meanwhile. A failure is logged once, until a write works.
    """

    path: str
    warning: str  # logged with the path and the reason
    dir_fd: Callable[[], int] | None = None
    in_place: bool = False  # on a failure (a full disk) overwrite it in place, padded
    _warned: bool = False

    def write(self, data: bytes) -> bool:
        """Replace the file with ``data``; False if it could not be written."""
        dir_fd = self.dir_fd() if self.dir_fd is not None else None
        final = os.path.basename(self.path) if dir_fd is not None else self.path
        try:
            replace_file(f"{final}.{os.getpid()}.tmp", final, data, dir_fd)
        except OSError as exc:
            if self.in_place and overwrite(final, data, dir_fd, pad=True) is not None:
                return True  # a full disk: what status shows matters most then
            if not self._warned:
                LOG.warning(self.warning, self.path, exc.strerror or exc)
                self._warned = True
            return False
        self._warned = False
        return True
