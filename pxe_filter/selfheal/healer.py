"""Self-healing: put files others changed back to the policy the daemon holds, and restore a
hostsdir removed or replaced under dnsmasq's feet. A hostsdir path swapped for a symlink (or
anything but a directory) is never followed: dnsmasq is stopped and the daemon exits 1.

A collaborator of the daemon: the hostsdir watcher calls :meth:`SelfHealer.repair`,
:meth:`~SelfHealer.on_overflow` and :meth:`~SelfHealer.on_lost`; the daemon's main loop calls
:meth:`~SelfHealer.check_hostsdir`.
"""

import logging
import os
from collections.abc import Callable
from typing import NoReturn

from pxe_filter.common.lifecycle import ServiceError
from pxe_filter.dnsmasq.control import Control, ControlError
from pxe_filter.status.recorder import StatusRecorder
from pxe_filter.sync import FilterSync

LOG = logging.getLogger("pxe_filter.daemon")  # the name operators already grep for


#: What :meth:`pxe_filter.hostsdir_cache.HostsDirCache.swapped` says of a path that can be
#: restored (a directory of ours made again); anything else is refused.
_RESTORABLE = ("missing", "replaced (new inode)")


class SelfHealer:
    """Repairs files and restores the hostsdir; reloads dnsmasq when that is needed.

    ``reload_dnsmasq(reason)`` reloads through the daemon (logged, recorded);
    ``threshold`` is the number of rewritten files beyond which dnsmasq is reloaded;
    ``wake()`` wakes the daemon's main loop, which then calls :meth:`check_hostsdir`.
    """

    def __init__(self, hostsdir: str, sync: FilterSync, control: Control,
                 status: StatusRecorder, *, reload_dnsmasq: Callable[[str], bool],
                 threshold: int, wake: Callable[[], None]) -> None:
        self.hostsdir = hostsdir
        self.sync = sync
        self.control = control
        self.status = status
        self._reload_dnsmasq = reload_dnsmasq
        self._threshold = threshold
        self._wake = wake
        #: Why the watcher reported the hostsdir gone: :meth:`check_hostsdir` is due.
        self.lost: str | None = None

    def repair(self, names: set[str], content: set[str]) -> list[str]:
        """Put the named files back to the policy (the watcher's callback)."""
        if self.lost is not None or self.sync.hostsdir.swapped() is not None:
            return []  # the directory held is no longer the hostsdir: check_hostsdir decides
        repaired = self.sync.repair(names, content)
        if len(repaired) > self._threshold:
            self._reload_dnsmasq(f"{len(repaired)} files were repaired")
        self.status.repaired(repaired)
        return repaired

    def on_overflow(self) -> None:
        """The inotify queue overflowed: re-check every file, reload dnsmasq."""
        repaired = self.sync.converge(reread=True) or []
        # dnsmasq's own queue on this directory most likely overflowed too.
        self._reload_dnsmasq("an inotify queue overflow")
        self.status.repaired(repaired)

    def on_lost(self, reason: str) -> None:
        """The watch on the hostsdir ended (removed, moved): wake the main loop."""
        self.lost = reason
        self._wake()

    def check_hostsdir(self) -> bool:
        """Restore a removed or replaced hostsdir; True if it was restored (watch it again).

        Raises ServiceError when it cannot be restored, when no dnsmasq control can make
        dnsmasq watch the restored directory, or when the path is now a symlink or not a
        directory (after stopping dnsmasq: it would follow the path at its next reload).
        """
        why = self.sync.hostsdir.swapped()
        if self.lost is None and why is None:
            return False
        if why is None and os.fstat(self.sync.hostsdir.dir_fd).st_nlink:
            # The held directory is still the hostsdir and still linked: a late event of a
            # watch replaced since (the removed directory's IGNORED). Nothing to restore.
            self.lost = None
            return True
        reason = why or "replaced (new inode)"
        noticed = self.lost or "periodic check"
        if self.lost is not None:
            reason = f"{reason}; {self.lost}"
        self.lost = None
        if why is not None and why not in _RESTORABLE:
            self._refuse(why, noticed)
        LOG.critical("The hostsdir %s was removed or replaced (%s): dnsmasq no longer "
                     "watches it. Restoring its content", self.hostsdir, reason)
        try:
            if why == "missing":
                os.makedirs(self.hostsdir, mode=0o755, exist_ok=True)
            written = len(self.sync.converge(reopen=True) or ())
            if why == "missing":
                os.fchmod(self.sync.hostsdir.dir_fd, 0o755)  # dnsmasq reads it as its user
            self.sync.hostsdir.lock()
        except OSError as exc:
            raise ServiceError(f"cannot restore the hostsdir {self.hostsdir}: "
                               f"{exc.strerror or exc}") from None
        LOG.warning("Hostsdir %s restored: %d file(s) written", self.hostsdir, written)
        self.status.error(f"hostsdir {reason}; restored {written} file(s)")
        if not self.control.can_reload:
            raise ServiceError(f"the hostsdir {self.hostsdir} was {reason} and dnsmasq only "
                               f"watches the old one; no [dnsmasq]control is configured, so "
                               f"exiting for systemd to restart dnsmasq with the filter")
        try:
            self.control.restart()
        except ControlError as exc:
            raise ServiceError(f"hostsdir restored but dnsmasq could not be restarted: "
                               f"{exc}") from None
        LOG.warning("dnsmasq restarted on the restored hostsdir")
        self.status.dnsmasq_event("restart", f"hostsdir {reason}")
        return True

    def _refuse(self, why: str, noticed: str) -> NoReturn:
        """The path is a symlink or not a directory: stop dnsmasq, raise ServiceError."""
        stopped = "no [dnsmasq]control: systemd stops dnsmasq with this service (BindsTo=)"
        if self.control.can_reload:
            try:
                self.control.halt()
                stopped = "dnsmasq stopped"
            except ControlError as exc:
                stopped = f"dnsmasq could NOT be stopped ({exc}): stop it by hand"
        message = (f"the hostsdir {self.hostsdir} is now {why} ({noticed}): someone swapped "
                   f"it. Not following it (dnsmasq would read what it points to at its next "
                   f"reload); {stopped}. Put the real directory back at {self.hostsdir}, "
                   f"find who swapped it, then start ironic-pxe-filter again")
        self.status.error(message)
        self.status.set_fail_closed(f"exiting: {message}")
        raise ServiceError(message)
