"""The write side of a dnsmasq ``--dhcp-hostsdir``: write only what changes, atomically.

Every write is a dotfile (ignored by dnsmasq) renamed over the target, so dnsmasq never reads
a half-written file. Files are never deleted except by an explicit purge (dnsmasq would keep
serving a deleted allow until SIGHUP) and the directory itself is never touched. What the
files say now is read and cached by :class:`pxe_filter.hostsdir_cache.HostsDirCache`.
"""

import contextlib
import errno
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from pxe_filter.hostsdir_cache import (
    WILDCARD,
    WILDCARD_MAC,
    HostsDirCache,
    Listing,
    content,
    parse,
)
from pxe_filter.policy import DesiredState

# Callers import the file format and the listing from here, with the writer.
__all__ = ["WILDCARD", "WILDCARD_MAC", "HostsDir", "Listing", "WriteObserver", "WriteReport",
           "content", "parse"]

LOG = logging.getLogger(__name__)


class WriteObserver(Protocol):
    """Told about each rename of ours just before it happens (the self-heal watcher)."""

    def expect(self, name: str) -> None:
        """A rename of ours onto ``name`` is about to happen."""

    def cancel(self, name: str) -> None:
        """The announced rename onto ``name`` failed."""


@dataclass
class WriteReport:
    """Outcome of one batch of writes."""

    written: int = 0
    failed: int = 0
    interrupted: bool = False


class HostsDir(HostsDirCache):
    """Cached view of a hostsdir and an atomic writer for it. Not thread-safe: callers lock."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.observer: WriteObserver | None = None

    def changes(self, desired: DesiredState) -> list[tuple[str, str, bool]]:
        """(file name, MAC, allow) for every file whose content must change, denials first."""
        todo = [(mac, mac, False) for mac in desired.deny - self.deny_names]
        allow = [(mac, mac, True) for mac in desired.allow - self.allow_names]
        # Files the database does not name: the wildcard, other spellings, MACs without port.
        for names, state in ((self.deny_names, False), (self.allow_names, True),
                             (self.odd_names, None)):
            for name in names - desired.allow - desired.deny:
                mac = self.aliases.get(name, name)
                want = desired.unknown_allowed if name == WILDCARD else desired.decision(mac)
                if state is not want:
                    (todo if not want else allow).append((name, mac, want))
        if self._lookup(WILDCARD) is None:
            (todo if not desired.unknown_allowed else allow).append(
                (WILDCARD, WILDCARD_MAC, desired.unknown_allowed))
        todo.extend(allow)  # every deny before any allow
        return todo

    def stale_files(self, desired: DesiredState, keep: set[str]) -> list[tuple[str, str]]:
        """(name, MAC) of files for MACs the policy does not name whose content already
        says what the wildcard says (so deleting them changes nothing dnsmasq decides)."""
        names = self.allow_names if desired.unknown_allowed else self.deny_names
        found = []
        for name in names:
            mac = self.aliases.get(name, name)
            if name != WILDCARD and mac not in desired.allow and mac not in desired.deny \
                    and mac not in keep:
                found.append((name, mac))
        return found

    def remove(self, files: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Delete ``files`` (name, MAC); the ones actually deleted."""
        removed = []
        for name, mac in files:
            try:
                os.unlink(name, dir_fd=self.dir_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                LOG.warning("Cannot delete %s: %s", os.path.join(self.path, name),
                            exc.strerror or exc)
                continue
            self._forget(name)
            self.inodes.pop(name, None)
            if self._touched is not None:
                self._touched.add(name)
            removed.append((name, mac))
        return removed

    def write_all(self, changes: Iterable[tuple[str, str, bool]],
                  should_stop: Callable[[], bool] = lambda: False) -> WriteReport:
        """Write each change; one failure is logged and does not stop the others."""
        report = WriteReport()
        for name, mac, allow in changes:
            if should_stop():
                report.interrupted = True
                break
            try:
                self.write(name, mac, allow)
            except OSError as exc:
                report.failed += 1
                LOG.error("Cannot write %s (%s): %s; will retry at the next sync",
                          os.path.join(self.path, name), "allow" if allow else "deny",
                          exc.strerror or exc)
            else:
                report.written += 1
        return report

    def _write_file(self, tmp: str, final: str, data: bytes,
                    before_rename: Callable[[], None] = lambda: None) -> int:
        """Write ``data`` to dotfile ``tmp``, rename it to ``final``; its inode."""
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644, dir_fd=self.dir_fd)
            try:
                os.fchmod(fd, 0o644)  # whatever the umask: dnsmasq may run as another user
                if os.write(fd, data) != len(data):
                    raise OSError(errno.EIO, "short write")
                ino = os.fstat(fd).st_ino
            finally:
                os.close(fd)
            before_rename()
            os.rename(tmp, final, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.dir_fd)
            raise
        return ino

    def write(self, name: str, mac: str, allow: bool) -> None:
        """Atomically replace file ``name`` with the allow/deny line of ``mac``.

        ``name`` must be a validated MAC spelling or the wildcard name, never raw input.
        """
        tmp = f".{mac if name != WILDCARD else WILDCARD}.tmp"
        observer = self.observer
        announced = False

        def announce() -> None:
            nonlocal announced
            if observer is not None:
                observer.expect(name)  # before the rename: its event may come at once
                announced = True

        try:
            ino = self._write_file(tmp, name, content(mac, allow), announce)
        except OSError:
            if announced:
                observer.cancel(name)
            # Unknown now: the next scan reads the file again and the next sync retries.
            self._forget(name)
            self.inodes.pop(name, None)
            raise
        finally:
            if self._touched is not None:
                self._touched.add(name)
        if self._touched is not None and name not in self.inodes:
            self._touched_new.add(name)  # before ``inodes``: see list_entries()
        self.inodes[name] = ino
        self._remember(name, mac, allow)
