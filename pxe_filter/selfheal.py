"""Self-healing hostsdir: inotify events -> put files back to the policy the daemon holds.

inotify_simple rather than pyinotify, which no longer imports on Python 3.12+ (README).
One thread reads events and hands them to :meth:`pxe_filter.sync.FilterSync.repair`, which
waits while a sync or broadcast holds the hostsdir. It does not drain the queue meanwhile:
a thread busy reading events would fight the writer for the GIL at every system call and
make a 20,000-file sync ten times slower. A burst larger than the kernel queue therefore
ends in IN_Q_OVERFLOW, answered by re-reading every file (and reloading dnsmasq, whose own
queue on the same burst overflowed too). Our own writes are told apart by inode in
``repair``; dotfiles (our temporary files, the lock, the state file) are dropped unseen.
"""

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable

from inotify_simple import INotify, flags

LOG = logging.getLogger(__name__)

_NAME_EVENTS = (flags.CREATE | flags.CLOSE_WRITE | flags.MODIFY | flags.MOVED_TO
                | flags.MOVED_FROM | flags.DELETE)
_CONTENT_EVENTS = flags.MODIFY | flags.CLOSE_WRITE
_SELF_EVENTS = flags.DELETE_SELF | flags.MOVE_SELF | flags.IGNORED | flags.UNMOUNT
MASK = _NAME_EVENTS | flags.DELETE_SELF | flags.MOVE_SELF | flags.ONLYDIR

#: repair(names, content_changed, wait) -> repaired names, or None when it could not wait.
RepairFunc = Callable[[set[str], set[str], bool], list[str] | None]


class HostsdirWatcher:
    """Watches one hostsdir; calls ``repair``, ``on_overflow`` and ``on_lost``."""

    def __init__(self, path: str, repair: RepairFunc, on_overflow: Callable[[], None],
                 on_lost: Callable[[str], None]) -> None:
        self.path = path
        self.repair = repair
        self.on_overflow = on_overflow
        self.on_lost = on_lost
        self.inotify = INotify()
        self._wd_lock = threading.Lock()
        self.wd = self.inotify.add_watch(path, MASK)
        self._stop_r, self._stop_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._thread: threading.Thread | None = None
        self._names: set[str] = set()
        self._content: set[str] = set()

    def start(self) -> None:
        """Start repairing (after the first sync: before it there is no policy to hold)."""
        self._thread = threading.Thread(target=self._run, name="hostsdir-watcher", daemon=True)
        self._thread.start()

    def rewatch(self, path: str) -> None:
        """Watch ``path`` again (the directory was recreated or replaced)."""
        with self._wd_lock:
            with contextlib.suppress(OSError):
                self.inotify.rm_watch(self.wd)
            self.wd = self.inotify.add_watch(path, MASK)
            self._names.clear()
            self._content.clear()

    def stop(self) -> None:
        """Stop the thread and close the inotify descriptor."""
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")
        if self._thread is not None:
            self._thread.join(5)
        self.inotify.close()
        os.close(self._stop_r)
        os.close(self._stop_w)

    def _run(self) -> None:
        while True:
            readable, _, _ = select.select([self.inotify, self._stop_r], [], [])
            if self._stop_r in readable:
                return
            try:
                self._collect()
                if self._names:
                    self.repair(self._names, self._content, True)
                    self._names, self._content = set(), set()
            except Exception:  # never let the thread die: the periodic sync still repairs
                LOG.exception("Hostsdir watcher: unexpected error; continuing")

    def _collect(self) -> None:
        overflow, lost = False, None
        with self._wd_lock:
            wd = self.wd
            for event in self.inotify.read(timeout=0):
                if event.mask & flags.Q_OVERFLOW:
                    overflow = True
                elif event.wd != wd:
                    continue  # the watch of a directory we no longer watch
                elif event.mask & _SELF_EVENTS:
                    lost = flags(event.mask & _SELF_EVENTS).name or "gone"
                elif event.name and not event.name.startswith("."):
                    self._names.add(event.name)
                    if event.mask & _CONTENT_EVENTS:
                        self._content.add(event.name)
        if lost:
            self._names.clear()
            self._content.clear()
            self.on_lost(f"inotify {lost}")
        elif overflow:
            LOG.warning("Hostsdir watcher: inotify queue overflowed, events were lost; "
                        "re-reading every file")
            self._names.clear()
            self._content.clear()
            self.on_overflow()
