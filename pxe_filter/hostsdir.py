"""The write side of a dnsmasq ``--dhcp-hostsdir``: write only what changes, atomically.

A file that exists is replaced by a dotfile (ignored by dnsmasq) renamed over it, so dnsmasq
never reads a half-written file. A MAC file that does not exist yet is created in place
(``O_CREAT | O_EXCL``, its whole line in one ``write()``, then closed): one directory entry
added instead of three changes (the dotfile's, then the rename's two), which is most of a
first sync's cost; why dnsmasq still never applies a partial line: ``HostsDir._create``.
Files are never deleted except by an explicit purge (dnsmasq would keep serving a
deleted allow until SIGHUP) and the directory itself is never touched. What the files say
now is read and cached by :class:`pxe_filter.hostsdir_cache.HostsDirCache`. One daemon
writes a hostsdir: :meth:`HostsDir.lock` holds a lock in it for the daemon's lifetime.
"""

import contextlib
import errno
import fcntl
import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from pxe_filter.common.lifecycle import ServiceError
from pxe_filter.hostsdir_cache import WILDCARD, WILDCARD_MAC, HostsDirCache, content, mac_of
from pxe_filter.policy import DesiredState

LOG = logging.getLogger(__name__)

#: A pre-written deny wildcard (a dotfile: dnsmasq ignores it). When a denial cannot be
#: written, renaming it over the wildcard still works: a rename needs no new data blocks.
RESERVE = f".{WILDCARD}.reserve"
_RESERVE_DATA = content(WILDCARD_MAC, False)
# O_EXCL: fails on any existing entry, a symlink included (never followed, never reused).
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: inotify events one write of ours makes on its final name: a rename (MOVED_TO), or an
#: in-place create (CREATE, MODIFY, CLOSE_WRITE).
RENAME_EVENTS, CREATE_EVENTS = 1, 3
LOCK_NAME = ".ironic-pxe-filter.lock"


class WriteObserver(Protocol):
    """Told about each write of ours just before it happens (the self-heal watcher)."""

    def expect(self, name: str, events: int = RENAME_EVENTS) -> None:
        """A write of ours making ``events`` inotify events on ``name`` is about to happen."""

    def cancel(self, name: str, events: int = RENAME_EVENTS) -> None:
        """The announced write onto ``name`` failed (some of its events may still come)."""


class _Unwatched(WriteObserver):
    """No watcher to tell (``--once``, tests)."""


@dataclass
class WriteReport:
    """Outcome of one batch of writes."""

    written: int = 0
    failed: int = 0
    interrupted: bool = False
    #: A MAC without a file of its own was left to the deny wildcard: dnsmasq may still
    #: remember an allow from a file deleted earlier, until it is reloaded.
    reload_needed: bool = False
    held: int = 0  # wildcard allows held back while a denial is not on disk
    #: A file rewritten that held content the filter did not write (maybe another MAC's
    #: line): dnsmasq keeps what it read until it is reloaded, whatever it was. An emptied
    #: file is not one: it gave dnsmasq no line, the rewrite supersedes the old one.
    foreign_content: str | None = None


class HostsDir(HostsDirCache):
    """Cached view of a hostsdir and an atomic writer for it. Not thread-safe: callers lock.

    Fails closed: a denial that cannot be written is put on disk another way (the file's
    deny line written in place, or the pre-written deny wildcard :data:`RESERVE` renamed
    over the wildcard: neither needs new blocks). What could not be denied on disk at all
    is listed in :attr:`unenforced`: only stopping dnsmasq then keeps the MAC unserved.
    """

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.observer: WriteObserver = _Unwatched()
        #: Denials not written, each covered by the deny wildcard: name -> why.
        self.closed: dict[str, str] = {}
        #: Allows not written (those MACs are not served): name -> why.
        self.unserved: dict[str, str] = {}
        #: Denials neither written nor covered (a file still allows): name -> why.
        self.unenforced: dict[str, str] = {}
        self._reported: set[str] = set()  # failures already logged at ERROR
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Take the lock of the directory held (again after :meth:`reopen`, leaving the one
        before); raises ServiceError naming the daemon that holds it."""
        path = os.path.join(self.path, LOCK_NAME)
        # The lock is held on a read-only descriptor: one open for writing for the
        # daemon's lifetime would keep the file system from being remounted read-only.
        try:
            fd = self._open_lock(os.O_RDONLY | os.O_CREAT)
        except OSError as exc:
            raise ServiceError(f"cannot open lock file {path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise ServiceError(f"another ironic-pxe-filter (pid {owner}) already manages "
                               f"{self.path} (lock {path}): stop it, or give this one its own "
                               f"[pxe_filter]dhcp_hostsdir") from None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # in the directory held before, gone or replaced
        self._lock_fd = fd
        self._set_owner(f"{os.getpid()}\n".encode())

    def unlock(self) -> None:
        """Release the lock (the file stays: removing it would race with a new owner)."""
        if self._lock_fd is not None:
            self._set_owner(b"")
            os.close(self._lock_fd)
            self._lock_fd = None

    def _open_lock(self, flags: int) -> int:
        return os.open(LOCK_NAME, flags | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644,
                       dir_fd=self.dir_fd)

    def _set_owner(self, data: bytes) -> None:
        """Write the owner's pid (or nothing) into the lock file; best effort."""
        with contextlib.suppress(OSError):
            fd = self._open_lock(os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def changes(self, desired: DesiredState) -> Iterator[tuple[str, bool]]:
        """(file name, allow) for every file whose content must change, denials first,
        one at a time for a full sync to write as they come: a first sync at 1M ports would
        otherwise hold 1M tuples (~70 MB) at its memory peak.

        The files the database does not name are decided up front; the MACs it names are
        each checked against the cache when reached, which writing the earlier ones in
        order cannot change (each change writes another name).
        """
        deny_others: list[tuple[str, bool]] = []
        allow_others: list[tuple[str, bool]] = []
        # Files the database does not name: the wildcard, MACs without port.
        # The set each file's content matches is subtracted first, so the intermediate set
        # stays small (the other order copies every deny name: 32 MB at 1M files).
        for names, state, first, then in (
                (self.deny_names, False, desired.deny, desired.allow),
                (self.allow_names, True, desired.allow, desired.deny),
                (self.odd_names, None, desired.allow, desired.deny)):
            for name in names - first - then:
                want = desired.decision(name)  # the wildcard's name: unknown_allowed
                if state is not want:
                    (deny_others if not want else allow_others).append((name, want))
        if self._lookup(WILDCARD) is None:
            (deny_others if not desired.unknown_allowed else allow_others).append(
                (WILDCARD, desired.unknown_allowed))
        # every deny before any allow
        yield from ((mac, False) for mac in _missing(desired.deny, self.deny_names))
        yield from deny_others
        yield from ((mac, True) for mac in _missing(desired.allow, self.allow_names))
        yield from allow_others

    def stale_files(self, desired: DesiredState, keep: set[str]) -> list[str]:
        """Files of MACs the policy does not name whose content already says what the
        wildcard says (so deleting them changes nothing dnsmasq decides)."""
        names = self.allow_names if desired.unknown_allowed else self.deny_names
        return [name for name in names if name != WILDCARD
                and name not in desired.allow and name not in desired.deny and name not in keep]

    def remove(self, names: Iterable[str]) -> list[str]:
        """Delete the files ``names``; the ones actually deleted."""
        removed = []
        for name in names:
            try:
                os.unlink(name, dir_fd=self.dir_fd)
            except FileNotFoundError:
                pass
            except OSError as exc:
                LOG.warning("Cannot delete %s: %s", os.path.join(self.path, name),
                            exc.strerror or exc)
                continue
            self.drop(name)
            removed.append(name)
        return removed

    @property
    def failing(self) -> bool:
        """Some file is not what the policy wants because a write failed."""
        return bool(self.closed or self.unserved or self.unenforced or self.foreign_failed)

    def write_all(self, changes: Iterable[tuple[str, bool]],
                  should_stop: Callable[[], bool] = lambda: False,
                  full: bool = False) -> WriteReport:
        """Write each change; one failure is logged and does not stop the others.

        ``full``: ``changes`` covers every file that differs from the whole policy, so the
        failures found now replace those recorded before.
        """
        report = WriteReport()
        if full:
            self.closed, self.unserved, self.unenforced = {}, {}, {}
        for name, allow in changes:
            if should_stop():
                report.interrupted = True
                break
            if name in self.odd_names and report.foreign_content is None:
                with contextlib.suppress(OSError):
                    if self.lstat(name).st_size:  # emptied, it says nothing of its own
                        report.foreign_content = name
            if allow and name == WILDCARD and (self.closed or self.unenforced):
                report.held += 1  # unknown MACs stay denied while a denial is not on disk
                continue
            try:
                self.write(name, allow)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                if not allow and self._deny_anyway(name, reason, report):
                    report.written += 1
                    continue
                report.failed += 1
                if allow:
                    self.unserved[name] = reason
                    self._report(name, f"Cannot write {os.path.join(self.path, name)} "
                                       f"(allow): {reason}; that MAC is not served until "
                                       f"it can be written (retried every second)")
            else:
                report.written += 1
                for failures in (self.closed, self.unserved, self.unenforced):
                    failures.pop(name, None)
                self._reported.discard(name)
        if full and not report.interrupted:
            self._reported &= {*self.closed, *self.unserved, *self.unenforced}
        return report

    def _report(self, name: str, message: str) -> None:
        """Log a failure at ERROR the first time, at DEBUG while it lasts."""
        LOG.log(logging.DEBUG if name in self._reported else logging.ERROR, "%s", message)
        self._reported.add(name)

    def _deny_anyway(self, name: str, reason: str, report: WriteReport) -> bool:
        """Deny ``name`` without a new file: its deny line in place, else the wildcard.

        True if ``name`` itself now denies on disk.
        """
        path = os.path.join(self.path, name)
        if name == WILDCARD:
            if self._close_wildcard():
                LOG.warning("Cannot replace %s (%s): denied unknown MACs without a new "
                            "file instead; free space or fix the file system", path, reason)
                return True
            self.unenforced[name] = reason
            self._report(name, f"Cannot deny unknown MACs in {path}: {reason}")
            return False
        if self._deny_in_place(name):
            LOG.warning("Cannot replace %s (%s): wrote its deny line in place instead; "
                        "free space or fix the file system", path, reason)
            return True
        found = self.read_state(name)
        if found is not None and found[1] is False:
            self._record_write(name, found[0], False)  # already denies: only the rewrite failed
            return True
        self.closed[name] = reason
        covered = self._close_wildcard()
        if not covered:
            self.unenforced[WILDCARD] = reason
        if found is not None:
            self.unenforced[name] = reason  # its own file beats the wildcard
        elif name in self.vanished:
            report.reload_needed = True
        self._report(name, f"Cannot write {path} (deny): {reason}. Failing closed: unknown "
                           f"MACs {'are denied' if covered else 'cannot be denied either'} "
                           f"until it can be written; free space, make the file system "
                           f"writable or remove what occupies {path}; retried every second")
        return False

    def _close_wildcard(self) -> bool:
        """Make the wildcard deny without writing new data; False if that failed too."""
        if self.state_of(WILDCARD) is False:
            return True
        self.observer.expect(WILDCARD)
        try:
            os.rename(RESERVE, WILDCARD, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            ino = self.lstat(WILDCARD).st_ino
        except OSError as exc:
            self.observer.cancel(WILDCARD)
            LOG.debug("Cannot rename %s over the wildcard: %s", RESERVE, exc)
            return self._deny_in_place(WILDCARD)
        self._record_write(WILDCARD, ino, False)
        return True

    def _deny_in_place(self, name: str) -> bool:
        """Overwrite the existing regular file ``name`` with its deny line, in place
        (see :func:`overwrite`); dnsmasq applies an in-place write at once."""
        ino = overwrite(name, content(mac_of(name), False), self.dir_fd)
        if ino is not None:
            self._record_write(name, ino, False)
        return ino is not None

    def _record_write(self, name: str, ino: int, allow: bool) -> None:
        """Note a write of ours onto ``name``: the cache, and a listing running meanwhile
        (``_touched_new`` before ``inodes``: see list_entries())."""
        if self._touched is not None:
            self._touched.add(name)
            if name not in self.inodes:
                self._touched_new.add(name)
        self.inodes[name] = ino
        self.vanished.discard(name)
        self._remember(name, allow)

    def ensure_reserve(self) -> bool:
        """Keep the pre-written deny wildcard :data:`RESERVE` in place; False if missing."""
        try:
            st = self.lstat(RESERVE)
            if stat.S_ISREG(st.st_mode) and st.st_size == len(_RESERVE_DATA):
                return True
        except FileNotFoundError:
            pass
        except OSError:
            return False
        try:
            replace_file(f".{WILDCARD}.tmp", RESERVE, _RESERVE_DATA, self.dir_fd)
        except OSError as exc:
            LOG.debug("Cannot write %s: %s", RESERVE, exc)
            return False
        return True

    def _create(self, name: str, data: bytes) -> int | None:
        """Create MAC file ``name`` holding ``data`` if no entry has that name; its inode.

        None if the name exists (the caller replaces it by a rename instead). Why dnsmasq
        never applies less than ``data``: it reads a hostsdir file on its close-after-write
        or rename event (neither comes before our close) and on SIGHUP or start-up, which
        may find the file empty: no line, as if it did not exist yet, which is what dnsmasq
        applied to that MAC until now. The line is one ``write()`` of under 32 bytes at
        offset 0 of a new file: Linux publishes the new size only once the bytes are in the
        page, so a reader sees all of it or nothing. A failed write empties and unlinks the
        file before closing it, so no partial line is left under the name.
        """
        try:
            fd = os.open(name, _CREATE_FLAGS, 0o644, dir_fd=self.dir_fd)
        except FileExistsError:
            return None
        try:
            return _fill(fd, data)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.dir_fd)
            raise
        finally:
            os.close(fd)

    def write(self, name: str, allow: bool) -> None:
        """Atomically replace (or create) file ``name`` with its allow/deny line.

        ``name`` must be a canonical MAC or the wildcard name, never raw input.
        """
        data = content(mac_of(name), allow)
        # A name without a directory entry at the last scan is created in place. The
        # wildcard keeps the rename: one file, and the one deciding for every other MAC.
        create = name not in self.inodes and name != WILDCARD
        events = CREATE_EVENTS if create else RENAME_EVENTS
        self.observer.expect(name, events)  # before the write: its events come at once
        try:
            ino = self._create(name, data) if create else None
            if ino is None:
                if create:  # made by someone since the scan: replaced instead
                    self.observer.cancel(name, events)
                    events = RENAME_EVENTS
                    self.observer.expect(name, events)
                ino = replace_file(f".{name}.tmp", name, data, self.dir_fd)
        except OSError:
            self.observer.cancel(name, events)
            # Unknown now: the next scan reads the file again and the next sync retries.
            self.drop(name)
            raise
        self._record_write(name, ino, allow)


def replace_file(tmp: str, final: str, data: bytes, dir_fd: int | None = None) -> int:
    """Write ``data`` to the temporary file ``tmp`` (mode 0644), rename it to ``final`` (both
    relative to ``dir_fd`` when given); its inode. On failure ``tmp`` is removed and the
    OSError raised. Also writes the daemon's state file and lease book."""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644, dir_fd=dir_fd)
        try:
            ino = _fill(fd, data)
        finally:
            os.close(fd)
        os.rename(tmp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    return ino


def overwrite(name: str, data: bytes, dir_fd: int | None = None,
              pad: bool = False) -> int | None:
    """Make existing regular file ``name`` hold ``data``, in place; its inode, or None.

    No new inode nor block (``data`` fits in the file's first block): what a full disk
    or quota still allows. A symlink is never followed. ``pad``: a shorter ``data`` is
    padded with spaces to the file's size (JSON ignores them), so a reader never sees the
    new content followed by the old one's end before the file is truncated.
    """
    try:
        fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
        try:
            st = os.fstat(fd)
            data = data.ljust(st.st_size) if pad else data
            if not stat.S_ISREG(st.st_mode) or os.pwrite(fd, data, 0) != len(data):
                return None
            os.ftruncate(fd, len(data))
            return st.st_ino
        finally:
            os.close(fd)
    except OSError:
        return None


def _fill(fd: int, data: bytes) -> int:
    """Write ``data`` into the file just opened at ``fd``, with mode 0644; its inode."""
    st = os.fstat(fd)
    if stat.S_IMODE(st.st_mode) != 0o644:
        # whatever the umask, a default ACL or a leftover dotfile's mode: dnsmasq may run
        # as another user. Checked first: one syscall less per file in a first sync; fixed
        # before the line is written, so a file never holds it with another mode.
        os.fchmod(fd, 0o644)
    if os.write(fd, data) != len(data):
        raise OSError(errno.EIO, "short write")
    return st.st_ino


def _missing(want: set[str], have: set[str]) -> Iterable[str]:
    """The elements of ``want`` not in ``have``: a set difference (C speed) when few are
    missing, a filter when most are (a first sync: no 1M-entry set built to be read once)."""
    if len(have) * 2 >= len(want):
        return want - have
    return (name for name in want if name not in have)
