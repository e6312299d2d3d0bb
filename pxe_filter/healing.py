"""The daemon's self-healing side: repair callbacks of the hostsdir watcher, and the
restoration of a hostsdir removed or replaced under dnsmasq's feet.

A mixin of :class:`pxe_filter.daemon.Daemon`, kept apart so the daemon's lifetime (start,
loop, reload, stop) reads on its own; it uses the daemon's ``sync``, ``control``,
``status``, ``watcher``, ``lock``, ``hostsdir`` and ``_reload_dnsmasq``.
"""

import logging
import os

from pxe_filter.checks import FatalError, HostsdirLock
from pxe_filter.dnsmasq.control import ControlError

LOG = logging.getLogger("pxe_filter.daemon")  # the name operators already grep for


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of ``path``, None if it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class SelfHealing:
    """Watcher callbacks and hostsdir restoration (mixed into the daemon)."""

    def _repair(self, names: set[str], content: set[str], wait: bool) -> list[str] | None:
        assert self.sync is not None
        repaired = self.sync.repair(names, content, wait)
        if repaired:
            if len(repaired) > self._threshold():
                self._reload_dnsmasq(f"{len(repaired)} files were repaired")
            if self.status is not None:
                self.status.repaired(repaired)
        return repaired

    def _on_overflow(self) -> None:
        assert self.sync is not None
        repaired = self.sync.recheck_all()
        # dnsmasq's own queue on this directory most likely overflowed too.
        self._reload_dnsmasq("an inotify queue overflow")
        if self.status is not None:
            self.status.repaired(repaired)

    def _on_lost(self, reason: str) -> None:
        self._lost = reason
        self._wake()

    def _check_hostsdir(self) -> None:
        """Restore a removed or replaced hostsdir; raises FatalError without a control."""
        assert self.hostsdir is not None and self.sync is not None
        current = identity(self.hostsdir)
        if self._lost is None and current == self._hostsdir_id:
            return
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
            if self.lock is not None:
                self.lock.release()
            self.lock = lock
            written = self.sync.restore_directory()
        except OSError as exc:
            raise FatalError(f"cannot restore the hostsdir {self.hostsdir}: "
                             f"{exc.strerror or exc}") from None
        self._hostsdir_id = identity(self.hostsdir)
        if self.watcher is not None:
            self.watcher.rewatch(self.hostsdir)
        LOG.warning("Hostsdir %s restored: %d file(s) written", self.hostsdir, written)
        if self.status is not None:
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
        if self.status is not None:
            self.status.dnsmasq_event("restart", f"hostsdir {reason}")
