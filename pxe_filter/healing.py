"""Self-healing: put files others changed back to the policy the daemon holds, and restore a
hostsdir removed or replaced under dnsmasq's feet.

A collaborator of the daemon: the hostsdir watcher calls :meth:`SelfHealer.repair`,
:meth:`~SelfHealer.on_overflow` and :meth:`~SelfHealer.on_lost`; the daemon's main loop calls
:meth:`~SelfHealer.check_hostsdir`.
"""

import logging
import os
from collections.abc import Callable

from pxe_filter.checks import FatalError, HostsdirLock
from pxe_filter.dnsmasq.control import Control, ControlError
from pxe_filter.state import StatusRecorder
from pxe_filter.sync import FilterSync

LOG = logging.getLogger("pxe_filter.daemon")  # the name operators already grep for


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of ``path``, None if it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class SelfHealer:
    """Repairs files and restores the hostsdir; reloads dnsmasq when that is needed.

    ``reload_dnsmasq(reason)`` reloads through the daemon (logged, recorded);
    ``threshold()`` is the number of rewritten files beyond which dnsmasq is reloaded;
    ``wake()`` wakes the daemon's main loop, which then calls :meth:`check_hostsdir`.
    """

    def __init__(self, hostsdir: str, sync: FilterSync, control: Control,
                 status: StatusRecorder, lock: HostsdirLock, *,
                 reload_dnsmasq: Callable[[str], bool], threshold: Callable[[], int],
                 wake: Callable[[], None]) -> None:
        self.hostsdir = hostsdir
        self.sync = sync
        self.control = control
        self.status = status
        self.lock = lock
        self._reload_dnsmasq = reload_dnsmasq
        self._threshold = threshold
        self._wake = wake
        self._identity = identity(hostsdir)
        self._lost: str | None = None

    @property
    def lost(self) -> bool:
        """The watcher reported the hostsdir gone; :meth:`check_hostsdir` is due."""
        return self._lost is not None

    def repair(self, names: set[str], content: set[str], wait: bool) -> list[str] | None:
        """Put the named files back to the policy (the watcher's callback)."""
        repaired = self.sync.repair(names, content, wait)
        if repaired:
            if len(repaired) > self._threshold():
                self._reload_dnsmasq(f"{len(repaired)} files were repaired")
            self.status.repaired(repaired)
        return repaired

    def on_overflow(self) -> None:
        """The inotify queue overflowed: re-check every file, reload dnsmasq."""
        repaired = self.sync.recheck_all()
        # dnsmasq's own queue on this directory most likely overflowed too.
        self._reload_dnsmasq("an inotify queue overflow")
        self.status.repaired(repaired)

    def on_lost(self, reason: str) -> None:
        """The watch on the hostsdir ended (removed, moved): wake the main loop."""
        self._lost = reason
        self._wake()

    def check_hostsdir(self) -> bool:
        """Restore a removed or replaced hostsdir; True if it was restored (watch it again).

        Raises FatalError when it cannot be restored, or when no dnsmasq control can make
        dnsmasq watch the restored directory.
        """
        current = identity(self.hostsdir)
        if self._lost is None and current == self._identity:
            return False
        reason = self._lost or ("missing" if current is None else "replaced (new inode)")
        self._lost = None
        LOG.critical("The hostsdir %s was removed or replaced (%s): dnsmasq no longer "
                     "watches it. Restoring its content", self.hostsdir, reason)
        try:
            if current is None:
                os.makedirs(self.hostsdir, mode=0o755, exist_ok=True)
                os.chmod(self.hostsdir, 0o755)  # noqa: S103 - dnsmasq reads it as its user
            lock = HostsdirLock(self.hostsdir)
            lock.acquire()
            self.lock.release()
            self.lock = lock
            written = self.sync.restore_directory()
        except OSError as exc:
            raise FatalError(f"cannot restore the hostsdir {self.hostsdir}: "
                             f"{exc.strerror or exc}") from None
        self._identity = identity(self.hostsdir)
        LOG.warning("Hostsdir %s restored: %d file(s) written", self.hostsdir, written)
        self.status.error(f"hostsdir {reason}; restored {written} file(s)")
        if not self.control.can_reload:
            raise FatalError(f"the hostsdir {self.hostsdir} was {reason} and dnsmasq only "
                             f"watches the old one; no [dnsmasq]control is configured, so "
                             f"exiting for systemd to restart dnsmasq with the filter")
        try:
            self.control.restart()
        except ControlError as exc:
            raise FatalError(f"hostsdir restored but dnsmasq could not be restarted: "
                             f"{exc}") from None
        LOG.warning("dnsmasq restarted on the restored hostsdir")
        self.status.dnsmasq_event("restart", f"hostsdir {reason}")
        return True
