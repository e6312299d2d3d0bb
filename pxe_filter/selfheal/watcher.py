"""Self-healing hostsdir: inotify events -> put files back to the policy the daemon holds.

inotify_simple rather than pyinotify, which no longer imports on Python 3.12+ (README).
One thread reads events and hands them to :meth:`pxe_filter.sync.FilterSync.repair`, which
waits while a sync or broadcast holds the hostsdir. That thread does not read meanwhile: a
thread busy reading events would fight the writer for the GIL at every system call and make
a 20,000-file sync ten times slower. Instead the writer drains the queue itself every
DRAIN_EVERY writes (:meth:`HostsdirWatcher.expect`, called by the writer before each write),
so our own bulk writes never overflow the kernel queue. Each write of ours is announced
before it happens and its events are dropped unseen (one for a rename, three for a file
created in place); any other event on a MAC file (a foreign edit in the middle of a
100k-file sync included) still reaches ``repair``, which tells our writes apart by inode.
Dotfiles (our temporary files, the lock, the state file) are dropped unseen. Only a
foreign burst larger than the kernel queue still ends in IN_Q_OVERFLOW, answered by
re-reading every file (and reloading dnsmasq, whose queue overflowed too).
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
# DONT_FOLLOW: a hostsdir swapped for a symlink is never watched through it.
MASK = _NAME_EVENTS | flags.DELETE_SELF | flags.MOVE_SELF | flags.ONLYDIR | flags.DONT_FOLLOW
#: The events a write of ours onto a MAC file makes: MOVED_TO for a rename (the dotfile's
#: four are dropped), CREATE, MODIFY and CLOSE_WRITE for a file created in place. Counted
#: per name: a foreign event beyond the count announced still reaches ``repair``.
_OWN_EVENTS = flags.MOVED_TO | flags.CREATE | flags.MODIFY | flags.CLOSE_WRITE
#: Writes between two drains: 5 events each at most, well below the 16384-event queue.
DRAIN_EVERY = 1000

#: repair(names, content_changed) -> the names repaired.
RepairFunc = Callable[[set[str], set[str]], list[str]]


class HostsdirWatcher:
    """Watches one hostsdir; calls ``repair``, ``on_overflow`` and ``on_lost``.

    Also the hostsdir writer's :class:`pxe_filter.hostsdir.WriteObserver`.
    """

    def __init__(self, path: str, repair: RepairFunc, on_overflow: Callable[[], None],
                 on_lost: Callable[[str], None]) -> None:
        self.repair = repair
        self.on_overflow = on_overflow
        self.on_lost = on_lost
        self.inotify = INotify(nonblocking=True)
        # Guards the watch, the pending names and the expected renames: the writer's
        # thread drains the queue too.
        self._wd_lock = threading.Lock()
        self.wd = self.inotify.add_watch(path, MASK)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._thread: threading.Thread | None = None
        self._names: set[str] = set()
        self._content: set[str] = set()
        self._expected: dict[str, int] = {}  # name -> events of ours not yet seen
        self._since_drain = 0
        self._overflow = False
        self._lost: str | None = None
        self._stopping = False
        self.drains = 0  # drains done by the writer (tests, logs)

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
            self._names, self._content = set(), set()
            self._expected.clear()
            self._since_drain = 0

    def expect(self, name: str, events: int = 1) -> None:
        """A write of ours making ``events`` events on ``name`` comes next (the writer calls
        this, holding the hostsdir); every DRAIN_EVERY calls, drain the queue so it cannot
        overflow."""
        with self._wd_lock:
            self._expected[name] = self._expected.get(name, 0) + events
            self._since_drain += 1
            if self._since_drain < DRAIN_EVERY:
                return
            self._collect()
            self.drains += 1
        if self._names or self._overflow or self._lost:
            self._wake()  # the thread may sleep on an empty queue: the events are ours now

    def cancel(self, name: str, events: int = 1) -> None:
        """The write announced by :meth:`expect` failed; those of its events that happened
        anyway reach ``repair`` (which finds nothing to do): never one foreign event less."""
        with self._wd_lock:
            count = self._expected.pop(name, 0) - events
            if count > 0:
                self._expected[name] = count

    def stop(self) -> None:
        """Stop the thread and close the inotify descriptor."""
        self._stopping = True
        self._wake()  # a full pipe wakes the thread too
        if self._thread is not None:
            self._thread.join(5)
        self.inotify.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"w")

    def _run(self) -> None:
        while True:
            select.select([self.inotify, self._wake_r], [], [])
            if self._stopping:
                return
            try:
                with contextlib.suppress(BlockingIOError):
                    while os.read(self._wake_r, 64):
                        pass
                self._handle()
            except Exception:  # never let the thread die: the periodic sync still repairs
                LOG.exception("Hostsdir watcher: unexpected error; continuing")

    def _handle(self) -> None:
        with self._wd_lock:
            self._collect()
            names, content = self._names, self._content
            overflow, lost = self._overflow, self._lost
            self._names, self._content = set(), set()
            self._overflow, self._lost = False, None
        if lost:
            self.on_lost(f"inotify {lost}")
        elif overflow:
            LOG.warning("Hostsdir watcher: inotify queue overflowed, events were lost; "
                        "re-reading every file")
            self.on_overflow()
        elif names:
            self.repair(names, content)

    def _collect(self) -> None:
        """Move queued events into the pending sets (caller holds ``_wd_lock``)."""
        self._since_drain = 0
        wd, expected = self.wd, self._expected
        for event_wd, mask, _cookie, name in self.inotify.read(timeout=0):
            if mask & flags.Q_OVERFLOW:
                self._overflow = True
                expected.clear()  # the events they stood for may be among the lost ones
            elif event_wd != wd:
                continue  # the watch of a directory we no longer watch
            elif mask & _SELF_EVENTS:
                self._lost = flags(mask & _SELF_EVENTS).name or "gone"
            elif name and not name.startswith("."):
                if mask & _OWN_EVENTS and expected.get(name):
                    expected[name] -= 1
                    if not expected[name]:
                        del expected[name]
                    continue
                self._names.add(name)
                if mask & _CONTENT_EVENTS:
                    self._content.add(name)
