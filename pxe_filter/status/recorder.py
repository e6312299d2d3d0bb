"""The daemon's figures as a JSON state file, written atomically, read by ``status``.

Written after every sync, broadcast, repair and dnsmasq event. The default path is a dotfile
in the hostsdir, which dnsmasq ignores and which the service may always write; it is then
written relative to the hostsdir the daemon holds open, never through a swapped path. On a
full disk it is overwritten in place (padded with spaces, which JSON ignores).
"""

import contextlib
import datetime
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from pxe_filter.hostsdir import replace_file

LOG = logging.getLogger(__name__)

STATE_NAME = ".ironic-pxe-filter.status.json"
FORMAT_VERSION = 1


def default_path(hostsdir: str) -> str:
    """Where the state file goes when ``[pxe_filter]state_file`` is unset."""
    return os.path.join(hostsdir, STATE_NAME)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


class StatusRecorder:
    """Collects the figures and writes them; thread-safe (RPC threads, watcher, main loop)."""

    def __init__(self, path: str, hostsdir: str,
                 figures: Callable[[], tuple[int, int, bool | None]],
                 dnsmasq: Callable[[], dict[str, object]],
                 dir_fd: Callable[[], int] | None = None) -> None:
        self.path = path
        # The held hostsdir when ``path`` is the default name in it (asked each time: a
        # restored hostsdir is held by a new descriptor).
        self._dir_fd = dir_fd
        self._figures = figures
        self._dnsmasq = dnsmasq
        #: Counts of Ironic notifications (received, applied, ignored: why), when followed.
        self.notification_counts: Callable[[], dict[str, int]] | None = None
        #: Which nodes the filter serves, one line (its [pxe_filter] scope options).
        self.scope: Callable[[], str] | None = None
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()  # one writer of the temporary file at a time
        self._warned = False
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

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, Any]]:
        """The figures, to change under the lock; the file is written after."""
        with self._lock:
            yield self.data
        self.write()

    def sync(self, result, first: bool = False) -> None:
        """Record a full sync (a pxe_filter.sync.SyncResult)."""
        if result.failed:
            self.error(f"{result.failed} file(s) could not be written in the last sync")
        with self._changing() as data:
            data["ready"] = True
            data["syncs"] += 1
            data["last_sync"] = {
                "at": _now(), "duration_s": round(result.duration, 3), "first": first,
                "written": result.written, "failed": result.failed,
                "purged": result.purged, "invalid_macs": result.invalid}

    def broadcast(self, result) -> None:
        """Record a broadcast (a pxe_filter.sync.SyncResult)."""
        with self._changing() as data:
            data["broadcasts"] += 1
            data["last_broadcast"] = {
                "at": _now(), "allowed": result.allowed, "denied": result.denied,
                "rejected": result.rejected, "written": result.written,
                "failed": result.failed}

    def repaired(self, names: list[str]) -> None:
        """Record files put back by self-healing."""
        if names:
            with self._changing() as data:
                data["repaired"] += len(names)
                data["last_repair"] = {"at": _now(), "files": sorted(names)[:20],
                                       "count": len(names)}

    def dnsmasq_event(self, kind: str, reason: str) -> None:
        """Record a dnsmasq reload or restart (``kind`` is "reload" or "restart")."""
        with self._changing() as data:
            events = data["dnsmasq_events"]
            events[f"{kind}s"] += 1
            events[f"last_{kind}"] = _now()
            if kind == "reload":
                events["last_reload_reason"] = reason

    def error(self, message: str, write: bool = False) -> None:
        """Count an error and keep its message."""
        with self._lock:
            errors = self.data["errors"]
            errors.update(count=errors["count"] + 1, last=message, last_at=_now())
        if write:
            self.write()

    def set_fail_closed(self, reason: str | None) -> None:
        """Record that the daemon fails closed (``reason``) or no longer does (None)."""
        with self._changing() as data:
            data.update(fail_closed=reason is not None, fail_closed_reason=reason)

    def stopped(self) -> None:
        """Mark the daemon stopped (clean shutdown)."""
        with self._changing() as data:
            data.update(running=False, stopped_at=_now())

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
        """Write the state file atomically (0644); a failure is logged once, not raised."""
        with self._io_lock:
            text = (json.dumps(self.snapshot(), indent=1, sort_keys=True) + "\n").encode()
            dir_fd = self._dir_fd() if self._dir_fd is not None else None
            final = os.path.basename(self.path) if dir_fd is not None else self.path
            try:
                replace_file(f"{final}.{os.getpid()}.tmp", final, text, dir_fd)
                self._warned = False
            except OSError as exc:
                if _overwrite(final, dir_fd, text):
                    return  # a full disk: what status shows matters most then
                if not self._warned:
                    LOG.warning("Cannot write the state file %s: %s", self.path,
                                exc.strerror or exc)
                    self._warned = True


def _overwrite(name: str, dir_fd: int | None, text: bytes) -> bool:
    """Overwrite the existing file in place, padded to its size; False if that failed."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        text = text.rstrip(b"\n").ljust(st.st_size - 1) + b"\n"
        return os.pwrite(fd, text, 0) == len(text)
    except OSError:
        return False
    finally:
        os.close(fd)
