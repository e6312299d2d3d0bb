"""The dnsmasq ``--dhcp-hostsdir`` side: read what is there, write only what changes.

Files are classified by content, never by size. Every write is a dotfile (ignored by
dnsmasq) renamed over the target, so dnsmasq never reads a half-written file. Files are never
deleted (dnsmasq would keep serving a deleted allow until SIGHUP) and the directory itself is
never touched. After the first full read the content of each file is cached with its inode;
later scans use ``os.scandir`` (inode numbers come free with the directory entries) and re-read
only files that appeared or were replaced. An in-place edit by someone else keeps the inode
and is only seen at the next full re-read (SIGHUP, or every FULL_READ_EVERY syncs).
"""

import contextlib
import errno
import logging
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from inspection.common import macs
from pxe_filter.policy import DesiredState

LOG = logging.getLogger(__name__)

#: The file that decides for MACs without a file of their own (ironic-inspector's name).
WILDCARD = "unknown_hosts_filter"
#: The MAC pattern written in the wildcard file.
WILDCARD_MAC = "*:*:*:*:*:*"
_TMP = re.compile(r"\.(?:[0-9a-f]{2}(?::[0-9a-f]{2}){5}|unknown_hosts_filter)\.tmp")
# Names that may be another spelling of a MAC (12 hex digits with optional separators).
_SPELLING = re.compile(r"[0-9A-Fa-f:.\-]{12,17}")
_MAX_CONTENT = 128


def content(mac: str, allow: bool) -> bytes:
    """The line dnsmasq reads for ``mac`` (canonical form or the wildcard)."""
    return f"{mac}\n".encode() if allow else f"{mac},ignore\n".encode()


def parse(mac: str, data: bytes) -> bool | None:
    """True/False if ``data`` is exactly the allow/deny line of ``mac``, else None."""
    if data == content(mac, True):
        return True
    if data == content(mac, False):
        return False
    return None


@dataclass(slots=True)
class _Entry:
    """A managed file: the MAC it speaks about and the policy its content expresses."""

    mac: str  # canonical MAC, or WILDCARD_MAC
    state: bool | None  # None: content is not our canonical line (it gets rewritten)


@dataclass
class WriteReport:
    """Outcome of one batch of writes."""

    written: int = 0
    failed: int = 0
    interrupted: bool = False


class HostsDir:
    """Cached view of a hostsdir and an atomic writer for it. Not thread-safe: callers lock."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self.inodes: dict[str, int] = {}  # every directory entry at the last scan -> inode
        self.files: dict[str, _Entry] = {}  # managed file name -> entry
        self.allow_names: set[str] = set()  # managed files whose content allows
        self.deny_names: set[str] = set()  # managed files whose content denies
        self.spellings: dict[str, set[str]] = {}  # canonical MAC -> non-canonical file names
        self.loaded = False
        self.reread = 0  # files whose content the last scan read

    def invalidate(self) -> None:
        """Forget the cache: the next scan re-reads every file's content."""
        for store in (self.inodes, self.files, self.allow_names, self.deny_names,
                      self.spellings):
            store.clear()
        self.loaded = False

    def scan(self) -> None:
        """Refresh the cache from the directory; raises OSError if it cannot be listed.

        Inode numbers come with the directory entries (no stat): when the listing equals
        the previous one, nothing was added, removed or replaced and nothing is read.
        """
        self.reread = 0
        with os.scandir(self.path) as entries:
            current = {entry.name: entry.inode() for entry in entries}
        if current != self.inodes:
            self._reconcile(current)
        self.loaded = True

    def _reconcile(self, current: dict[str, int]) -> None:
        previous = self.inodes
        for name, ino in current.items():
            if previous.get(name) == ino:
                continue
            if name.startswith("."):
                if _TMP.fullmatch(name):
                    self._remove_stale(name)
                continue
            entry = self.files.get(name)
            mac = entry.mac if entry is not None else self._classify(name)
            if mac is not None:
                self._read(name, mac)
        for name in [n for n in self.files if n not in current]:
            self._forget(name)
        self.inodes = current

    def _classify(self, name: str) -> str | None:
        """The canonical MAC a file name stands for, or None for files we leave alone."""
        if name == WILDCARD:
            return WILDCARD_MAC
        if macs.is_canonical(name):
            return name
        if _SPELLING.fullmatch(name):
            try:
                return macs.normalize_mac(name)
            except macs.InvalidMAC:
                return None
        return None

    def _read(self, name: str, mac: str) -> None:
        path = os.path.join(self.path, name)
        self.reread += 1
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            self._forget(name)
            return
        except OSError as exc:
            # A symlink (ELOOP) or an unreadable file: unknown content, rewritten if we can.
            LOG.debug("Cannot read %s: %s", path, exc)
            self._remember(name, mac, None)
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self._forget(name)  # a directory or device: not ours, writes to it will fail
                return
            data = os.read(fd, _MAX_CONTENT)
        except OSError as exc:
            LOG.debug("Cannot read %s: %s", path, exc)
            data = b""
        finally:
            os.close(fd)
        self._remember(name, mac, parse(mac, data))

    def _remember(self, name: str, mac: str, state: bool | None) -> None:
        entry = self.files.get(name)
        if entry is None:
            self.files[name] = _Entry(mac, state)
            if name not in (mac, WILDCARD):
                self.spellings.setdefault(mac, set()).add(name)
        else:
            entry.state = state
        if state is None:
            self.allow_names.discard(name)
            self.deny_names.discard(name)
        elif state:
            self.allow_names.add(name)
            self.deny_names.discard(name)
        else:
            self.deny_names.add(name)
            self.allow_names.discard(name)

    def _forget(self, name: str) -> None:
        entry = self.files.pop(name, None)
        self.allow_names.discard(name)
        self.deny_names.discard(name)
        if entry is not None and name != entry.mac:
            names = self.spellings.get(entry.mac)
            if names is not None:
                names.discard(name)
                if not names:
                    del self.spellings[entry.mac]

    def _remove_stale(self, name: str) -> None:
        # Only our own temporary names match _TMP; callers hold the lifetime lock, so no
        # write of ours is in flight: such a file is left over from a crash.
        path = os.path.join(self.path, name)
        try:
            os.unlink(path)
            LOG.info("Removed stale temporary file %s", path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            LOG.warning("Cannot remove stale temporary file %s: %s", path, exc)

    def state_of(self, name: str) -> bool | None:
        """Cached policy of file ``name`` (None if unknown, absent or not canonical)."""
        entry = self.files.get(name)
        return None if entry is None else entry.state

    def inode_of(self, name: str) -> int | None:
        """Inode of ``name`` at the last scan or write."""
        return self.inodes.get(name)

    def changes(self, desired: DesiredState) -> list[tuple[str, str, bool]]:
        """(file name, MAC, allow) for every file whose content must change, denials first."""
        todo = [(mac, mac, False) for mac in desired.deny - self.deny_names]
        allow = [(mac, mac, True) for mac in desired.allow - self.allow_names]
        # Files the database does not name: the wildcard, other spellings, MACs without port.
        for name in self.files.keys() - desired.allow - desired.deny:
            entry = self.files[name]
            want = desired.unknown_allowed if name == WILDCARD else desired.decision(entry.mac)
            if entry.state is not want:
                (todo if not want else allow).append((name, entry.mac, want))
        if WILDCARD not in self.files:
            (todo if not desired.unknown_allowed else allow).append(
                (WILDCARD, WILDCARD_MAC, desired.unknown_allowed))
        todo.extend(allow)  # every deny before any allow
        return todo

    def names_for(self, mac: str) -> list[str]:
        """The canonical file name of ``mac`` plus any non-canonical spellings present."""
        return [mac, *sorted(self.spellings.get(mac, ()))]

    def foreign_change(self, name: str, content_event: bool,
                       want: Callable[[str, str], bool]) -> tuple[str, str] | None:
        """(what happened, MAC) if file ``name`` no longer says ``want(name, mac)``.

        Cheap for our own renames: the inode we recorded is still there and no in-place
        write was reported (``content_event``), so nothing is read.
        """
        entry = self.files.get(name)
        mac = entry.mac if entry is not None else self._classify(name)
        if mac is None:
            return None
        try:
            st = os.lstat(os.path.join(self.path, name))
        except FileNotFoundError:
            if entry is None:
                return None  # deleted by us (purge), or never one of ours
            self._forget(name)
            self.inodes.pop(name, None)
            return "deleted", mac
        except OSError:
            return None
        if entry is not None and not content_event and self.inodes.get(name) == st.st_ino:
            return None
        known = entry is not None
        self.inodes[name] = st.st_ino
        self._read(name, mac)
        entry = self.files.get(name)
        if entry is None or entry.state is want(name, mac):
            return None  # not a regular file (cannot be replaced by us), or content right
        if not known:
            return "created", mac
        if st.st_size == 0:
            return "truncated", mac
        return ("edited" if content_event else "replaced"), mac

    def stale_files(self, desired: DesiredState, keep: set[str]) -> list[tuple[str, str]]:
        """(name, MAC) of files for MACs the policy does not name whose content already
        says what the wildcard says (so deleting them changes nothing dnsmasq decides)."""
        return [(name, entry.mac) for name, entry in self.files.items()
                if name != WILDCARD and entry.mac not in desired.allow
                and entry.mac not in desired.deny and entry.mac not in keep
                and entry.state is desired.unknown_allowed]

    def remove(self, files: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Delete ``files`` (name, MAC); the ones actually deleted."""
        removed = []
        for name, mac in files:
            try:
                os.unlink(os.path.join(self.path, name))
            except FileNotFoundError:
                pass
            except OSError as exc:
                LOG.warning("Cannot delete %s: %s", os.path.join(self.path, name),
                            exc.strerror or exc)
                continue
            self._forget(name)
            self.inodes.pop(name, None)
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

    def write(self, name: str, mac: str, allow: bool) -> None:
        """Atomically replace file ``name`` with the allow/deny line of ``mac``.

        ``name`` must be a validated MAC spelling or the wildcard name, never raw input.
        """
        final = os.path.join(self.path, name)
        tmp = os.path.join(self.path, f".{mac if name != WILDCARD else WILDCARD}.tmp")
        data = content(mac, allow)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644)
            try:
                os.fchmod(fd, 0o644)  # whatever the umask: dnsmasq may run as another user
                if os.write(fd, data) != len(data):
                    raise OSError(errno.EIO, "short write")
                ino = os.fstat(fd).st_ino
            finally:
                os.close(fd)
            os.rename(tmp, final)
        except OSError:
            # Unknown now: the next scan reads the file again and the next sync retries.
            self._forget(name)
            self.inodes.pop(name, None)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.inodes[name] = ino
        self._remember(name, mac, allow)
