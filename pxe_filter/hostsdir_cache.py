"""The read side of a dnsmasq ``--dhcp-hostsdir``: what each file says, cached by inode.

After the first full read the content of each file is cached with its inode; later scans use
``os.scandir`` (inode numbers come free with the directory entries) and re-read only files
that appeared or were replaced. An in-place edit by someone else keeps the inode: the
watcher's content events report it (pxe_filter.selfheal), and a full re-read (SIGHUP, an
inotify overflow) finds it too, reading without the caller's lock
(:meth:`HostsDirCache.changed_contents`) so broadcasts are not held up by it. Reads use
O_NOATIME where allowed: re-reading 100k files must not dirty 100k inodes for the journal to
write back while broadcasts wait on it. Files are classified by content, never by size.
The writer is :class:`pxe_filter.hostsdir.HostsDir`, built on this cache.

Every file operation is relative to a descriptor of the directory opened once (O_NOFOLLOW):
a hostsdir swapped for a symlink is never followed, and :meth:`HostsDirCache.swapped` tells.
"""

import contextlib
import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from sys import intern

from pxe_filter.common import macs

# The name the whole hostsdir code logged under before the split: log lines keep it.
LOG = logging.getLogger("pxe_filter.hostsdir")

#: The file that decides for MACs without a file of their own (ironic-inspector's name).
WILDCARD = "unknown_hosts_filter"
#: The MAC pattern written in the wildcard file.
WILDCARD_MAC = "*:*:*:*:*:*"
_MAX_CONTENT = 128
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_NOATIME = getattr(os, "O_NOATIME", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def content(mac: str, allow: bool) -> bytes:
    """The line dnsmasq reads for ``mac`` (canonical form or the wildcard)."""
    return f"{mac}\n".encode() if allow else f"{mac},ignore\n".encode()


def mac_of(name: str) -> str:
    """The MAC written in managed file ``name``: its name, or the wildcard's pattern."""
    return WILDCARD_MAC if name == WILDCARD else name


def _managed(name: str) -> bool:
    """Whether file ``name`` is ours to manage, else foreign: dnsmasq reads a file whatever
    its name, and only the canonical form is ours (pxe_filter.common.macs)."""
    return name == WILDCARD or macs.is_canonical(name)


def parse(mac: str, data: bytes) -> bool | None:
    """True/False if ``data`` is exactly the allow/deny line of ``mac``, else None."""
    if data == content(mac, True):
        return True
    if data == content(mac, False):
        return False
    return None


@dataclass
class Listing:
    """Directory entries that are new or were replaced since the cache, and how many of
    the cached names are still there (fewer than cached: something was removed)."""

    changed: dict[str, int]
    seen: int


class HostsDirCache:
    """Cached view of a hostsdir: inodes and the policy each file's content says.

    Not thread-safe: callers lock, except where a method says it needs no lock.
    """

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        #: The hostsdir every file operation is relative to (see :meth:`swapped`).
        self.dir_fd = -1
        self.reopen()
        self.inodes: dict[str, int] = {}  # every directory entry at the last scan -> inode
        # Managed files, by the policy their content expresses: three sets of names rather
        # than an object per file (100k files: ~12 MB less). A name is its MAC (mac_of()).
        self.allow_names: set[str] = set()  # content allows
        self.deny_names: set[str] = set()  # content denies
        self.odd_names: set[str] = set()  # content is not our canonical line: rewritten
        self._sets = ((True, self.allow_names), (False, self.deny_names),
                      (None, self.odd_names))
        self.reread = 0  # files whose content the last scan read
        #: Managed files that vanished (deleted, or replaced by a directory) and were not
        #: written since: dnsmasq may still apply what they said, until it is reloaded.
        self.vanished: set[str] = set()
        #: Entries the filter did not write (not a dotfile, a canonical MAC nor the
        #: wildcard; ``AA:BB:...`` is one): dnsmasq reads them all, so
        #: :func:`pxe_filter.foreign_files.remove_foreign` removes them.
        self.foreign: set[str] = set()
        #: Foreign entries that went away without us: dnsmasq keeps them until SIGHUP.
        self.foreign_gone: set[str] = set()
        #: Foreign files we could only empty in place: name -> inode.
        self.neutral: dict[str, int] = {}
        #: Foreign files neither removed nor emptied: name -> why (the fail-safe acts).
        self.foreign_failed: dict[str, str] = {}
        self._noatime = _NOATIME
        # Names written or removed since list_entries() began (None: no listing running),
        # and those of them that were new to the cache. The writer fills them in.
        self._touched: set[str] | None = None
        self._touched_new: set[str] = set()

    def close(self) -> None:
        """Close the directory descriptor."""
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def reopen(self) -> None:
        """Hold the directory now at :attr:`path` (at start, or restored); raises OSError."""
        fd = os.open(self.path, _DIR_FLAGS)
        self.close()
        self.dir_fd = fd
        st = os.fstat(fd)
        self.identity = (st.st_dev, st.st_ino)

    def swapped(self) -> str | None:
        """Why :attr:`path` is no longer the directory held (None if it still is)."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return "missing"
        except OSError as exc:
            return f"unreadable ({exc.strerror or exc})"
        if stat.S_ISLNK(st.st_mode):
            return "a symbolic link"
        if not stat.S_ISDIR(st.st_mode):
            return "not a directory"
        if (st.st_dev, st.st_ino) != self.identity:
            return "replaced (new inode)"
        return None

    def invalidate(self) -> None:
        """Forget the cache: the next scan re-reads every file's content."""
        for store in (self.inodes, self.allow_names, self.deny_names, self.odd_names,
                      self.vanished, self.foreign):
            store.clear()

    def list_entries(self) -> Listing:
        """What changed in the directory since the cache; needs no lock. Raises OSError.

        Only entries that are new or have another inode are kept, not the whole listing
        (at 100k files that would be ~14 MB for an instant). Writes made meanwhile are
        noted so :meth:`scan` does not trust a listing that may predate them.
        """
        self._touched_new = new = set()
        self._touched = set()
        inodes = self.inodes
        changed: dict[str, int] = {}
        seen = 0
        try:
            with self._entries() as entries:
                for entry in entries:
                    old = inodes.get(entry.name)
                    ino = entry.inode()
                    # A name new to the cache is added to ``new`` before ``inodes``, so a
                    # file written meanwhile is never counted as one the cache had.
                    if old is not None and entry.name not in new:
                        seen += 1
                    if old != ino:
                        changed[intern(entry.name)] = ino  # see _entries()
        except OSError:
            self._touched = None
            raise
        return Listing(changed, seen)

    def scan(self, listing: Listing | None = None) -> None:
        """Refresh the cache from the directory (or from ``listing``); raises OSError.

        Inode numbers come with the directory entries (no stat): when the listing equals
        the previous one, nothing was added, removed or replaced and nothing is read.
        """
        self.reread = 0
        touched, self._touched = self._touched, None
        new, self._touched_new = self._touched_new, set()
        if listing is not None:
            for name in touched or ():
                listing.changed.pop(name, None)  # written by us meanwhile: the cache knows
            if listing.seen != len(self.inodes) - len(new):
                listing = None  # files went away (or a failed write raced): list all
        if listing is None:
            with self._entries() as entries:
                current = {intern(entry.name): entry.inode() for entry in entries}
            if current != self.inodes:
                self._reconcile(current)
        elif listing.changed:
            self._reconcile(listing.changed, complete=False)

    def _reconcile(self, current: dict[str, int], complete: bool = True) -> None:
        previous = self.inodes
        for name, ino in current.items():
            if previous.get(name) == ino:
                continue
            if name.startswith("."):
                # HostsDir.write's temporary name ".<name>.tmp": left behind by a crash
                if name.endswith(".tmp") and _managed(name[1:-4]):
                    self._remove_stale(name)
                continue
            if _managed(name):
                self._read(name)
            else:
                self.foreign.add(name)
        if not complete:
            previous.update(current)
            return
        gone = {name for name in self.foreign if name not in current}
        self.foreign -= gone
        self.foreign_gone |= gone
        for name in [n for n in self.managed_names() if n not in current]:
            self._forget(name)
            self.vanished.add(name)
        self.inodes = current

    def _open(self, name: str) -> int:
        if self._noatime:
            try:
                return os.open(name, _READ_FLAGS | self._noatime, dir_fd=self.dir_fd)
            except PermissionError:
                # O_NOATIME needs the file's owner (or CAP_FOWNER): not for this directory.
                self._noatime = 0
        return os.open(name, _READ_FLAGS, dir_fd=self.dir_fd)

    @contextlib.contextmanager
    def _entries(self) -> Iterator[Iterator[os.DirEntry]]:
        # Names kept from a listing are interned, as the policy's MACs are
        # (pxe_filter.source): one string per MAC for the cache and the policy, not one each.
        # A descriptor of its own per listing: a dup of dir_fd would share the read offset
        # with any other listing running at the same time.
        fd = os.open(".", _DIR_FLAGS, dir_fd=self.dir_fd)
        try:
            with os.scandir(fd) as entries:
                yield entries
        finally:
            os.close(fd)

    def lstat(self, name: str) -> os.stat_result:
        """lstat of file ``name`` in the held directory; raises OSError."""
        return os.stat(name, dir_fd=self.dir_fd, follow_symlinks=False)

    def read_state(self, name: str) -> tuple[int, bool | None] | None:
        """(inode, policy of its content) of file ``name``, cache untouched; no lock needed.

        None if the file is gone or not a regular file; policy None if unreadable or not
        the canonical line (a symlink included: it is replaced, never followed).
        """
        found = self._read_file(name)
        return None if found is None else (found[0], parse(mac_of(name), found[1] or b""))

    def _read_file(self, name: str) -> tuple[int, bytes | None] | None:
        """(inode, first bytes or None if unreadable) of ``name``; None if it is gone or
        not a regular file (a directory or device: not ours, writes to it will fail)."""
        try:
            fd = self._open(name)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    return None
                return st.st_ino, os.read(fd, _MAX_CONTENT)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            LOG.debug("Cannot read %s: %s", os.path.join(self.path, name), exc)
            try:
                return self.lstat(name).st_ino, None
            except OSError:
                return None

    def _read(self, name: str) -> None:
        self.reread += 1
        found = self.read_state(name)
        if found is None:
            if self._lookup(name) is not None:
                self.vanished.add(name)
            self._forget(name)
        else:
            self._remember(name, found[1])

    def managed_names(self) -> list[str]:
        """Names of the managed files (a copy, to read them later without the lock)."""
        return [*self.deny_names, *self.allow_names, *self.odd_names]

    def _lookup(self, name: str) -> tuple[str, bool | None] | None:
        """(MAC, policy of the content) of managed file ``name``; None if not managed."""
        for state, names in self._sets:
            if name in names:
                return mac_of(name), state
        return None

    def changed_contents(self, names: Iterable[str]) -> list[tuple[str, int, bool | None]]:
        """Read ``names`` without the caller's lock; (name, inode, policy) of those whose
        content no longer matches the cache. Apply them with :meth:`apply_contents`."""
        found = []
        for name in names:
            known = self._lookup(name)
            if known is None:
                continue
            state = self.read_state(name)
            if state is not None and state[1] is not known[1]:
                found.append((name, state[0], state[1]))
        return found

    def apply_contents(self, found: Iterable[tuple[str, int, bool | None]]) -> None:
        """Record contents read by :meth:`changed_contents` (caller holds the lock);
        a file replaced since it was read keeps its cache entry: the next scan reads it."""
        for name, ino, state in found:
            known = self._lookup(name)
            if known is not None and self.inodes.get(name) == ino:
                self._remember(name, state)

    def _remember(self, name: str, state: bool | None) -> None:
        for value, names in self._sets:
            if value is state:
                names.add(name)
            else:
                names.discard(name)

    def _forget(self, name: str) -> None:
        for _, names in self._sets:
            names.discard(name)

    def _remove_stale(self, name: str) -> None:
        # Only our own temporary names come here; callers hold the lifetime lock, so no
        # write of ours is in flight: such a file is left over from a crash.
        path = os.path.join(self.path, name)
        try:
            os.unlink(name, dir_fd=self.dir_fd)
            LOG.info("Removed stale temporary file %s", path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            LOG.warning("Cannot remove stale temporary file %s: %s", path, exc)

    def seen_foreign(self, name: str) -> bool:
        """Record entry ``name`` (an inotify event) if it is a foreign one still present."""
        if name.startswith(".") or _managed(name):
            return False
        if name not in self.foreign:
            try:
                self.inodes[name] = self.lstat(name).st_ino
            except OSError:
                return False  # deleted already (by us, or before we ever saw it)
            self.foreign.add(name)
        return True

    def drop(self, name: str) -> None:
        """Forget entry ``name``, deleted or unknown after a failed write (a listing running
        meanwhile must not trust it either)."""
        self._forget(name)
        self.inodes.pop(name, None)
        self.foreign.discard(name)
        self.neutral.pop(name, None)
        if self._touched is not None:
            self._touched.add(name)

    def state_of(self, name: str) -> bool | None:
        """Cached policy of file ``name`` (None if unknown, absent or not canonical)."""
        known = self._lookup(name)
        return None if known is None else known[1]

    def foreign_change(self, name: str, content_event: bool,
                       want: Callable[[str], bool]) -> str | None:
        """What happened to file ``name`` if it no longer says ``want(name)``.

        Cheap for our own renames: the inode we recorded is still there and no in-place
        write was reported (``content_event``), so nothing is read.
        """
        if not _managed(name):
            return None
        known = self._lookup(name)
        try:
            st = self.lstat(name)
        except FileNotFoundError:
            if known is None:
                return None  # deleted by us (purge), or never one of ours
            self.drop(name)
            self.vanished.add(name)
            return "deleted"
        except OSError:
            return None
        if known is not None and not content_event and self.inodes.get(name) == st.st_ino:
            return None
        self.inodes[name] = st.st_ino
        self._read(name)
        now = self._lookup(name)
        if now is None or now[1] is want(name):
            return None  # not a regular file (cannot be replaced by us), or content right
        if known is None:
            return "created"
        if st.st_size == 0:
            return "truncated"
        return "edited" if content_event else "replaced"

