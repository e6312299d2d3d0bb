"""Fail closed: dnsmasq never serves a MAC whose denial could not be written.

The hostsdir writer puts every denial on disk if anything still can
(:class:`pxe_filter.hostsdir.HostsDir`: a new file, the deny line in place, or the reserved
deny wildcard renamed over the wildcard). After every batch of writes
:meth:`FailSafe.after_writes` decides what dnsmasq must be told about the rest: a reload
when a MAC left to the deny wildcard had a file deleted earlier, or when a file rewritten
held content someone else wrote (dnsmasq keeps what it read until SIGHUP), a stop when a
denial is not on disk at all (a file that still allows, on a read-only or immutable file
system), and a start again once a full pass (a sync, or the retry every second) finds every
denial on disk. Without a ``[dnsmasq]control`` it can do neither: the daemon then exits 1,
and systemd stops dnsmasq with it (``BindsTo=``).
"""

import logging
import os
import threading
from collections.abc import Callable

from pxe_filter.dnsmasq.control import Control, ControlError
from pxe_filter.foreign_files import ForeignReport
from pxe_filter.hostsdir import WILDCARD, HostsDir, WriteReport
from pxe_filter.status.recorder import StatusRecorder

LOG = logging.getLogger("pxe_filter.daemon")  # the name operators already grep for

_FIX = ("free space (ENOSPC, EDQUOT), remount the file system read-write (EROFS), "
        "'chattr -i' the file (EPERM) or remove what occupies the name")


def _some(failures: dict[str, str]) -> str:
    names = sorted(failures)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{shown} ({failures[names[0]]})"


class FailSafe:
    """Reloads, stops and restarts dnsmasq as the hostsdir's write failures require.

    ``reload_dnsmasq(reason)`` reloads through the daemon (False if it could not);
    ``wake()`` wakes the main loop, which exits 1 when :attr:`fatal` is set.
    """

    def __init__(self, hostsdir: HostsDir, control: Control, status: StatusRecorder, *,
                 reload_dnsmasq: Callable[[str], bool], wake: Callable[[], None]) -> None:
        self.hostsdir = hostsdir
        self.control = control
        self.status = status
        self._reload_dnsmasq = reload_dnsmasq
        self._wake = wake
        #: Why dnsmasq was stopped (None: it was not).
        self.halted: str | None = None
        #: Set when only exiting keeps dnsmasq from serving: the main loop exits 1 with it.
        self.fatal: str | None = None
        #: The daemon started dnsmasq (after the first sync); before, there is nothing to
        #: start again.
        self.started = False
        self._reason: str | None = None

    def after_writes(self, report: WriteReport, full: bool) -> None:
        """After a batch of writes (the sync's lock held): act on what is not on disk."""
        lingering = None
        if report.reload_needed:
            vanished = sorted(set(self.hostsdir.closed) & self.hostsdir.vanished)
            lingering = (f"the file of {', '.join(vanished[:3]) or 'a MAC'} was deleted and "
                         f"its denial cannot be written", "the deleted file", _FIX)
        elif report.foreign_content is not None and self.started:
            lingering = (f"foreign content in "
                         f"{os.path.join(self.hostsdir.path, report.foreign_content)}",
                         "what it held", "find who writes into the hostsdir")
        self._act(lingering, full)

    def after_foreign(self, report: ForeignReport) -> None:
        """Files the filter did not write were removed (the sync's lock held): dnsmasq
        keeps what they said until SIGHUP, so reload it; stop it if one stays."""
        lingering = None
        if report.reload_needed and self.started:
            shown = [*report.removed, *report.neutralised, *report.gone]
            lingering = (f"{len(shown)} file(s) the filter did not write left the hostsdir "
                         f"({', '.join(shown[:3])})", "what they said",
                         "keep nothing but the filter's files in the hostsdir")
        self._act(lingering, False)

    def _act(self, lingering: tuple[str, str, str] | None, full: bool) -> None:
        """Stop dnsmasq while something is not on disk, else reload it when it may still
        apply a file that left the hostsdir (``lingering``: why, what it applies, the fix);
        start it again after a ``full`` pass that wrote everything."""
        hd = self.hostsdir
        if (hd.unenforced or hd.foreign_failed) and hd.swapped() is not None:
            # The directory itself went, not a file: the healer restores it or exits.
            self._wake()
            return
        if hd.unenforced or hd.foreign_failed:
            if self.halted is None and self.fatal is None:
                self._halt(f"cannot deny {_some(hd.unenforced)}" if hd.unenforced else
                           f"cannot remove {_some(hd.foreign_failed)}, a file the filter "
                           f"did not write")
        elif lingering is not None and self.halted is None and self.fatal is None:
            why, what, fix = lingering
            if not self.control.can_reload:
                self._fail(f"{why}: dnsmasq still applies {what} until it is reloaded, and "
                           f"no [dnsmasq]control can reload it: exiting so that systemd "
                           f"restarts dnsmasq with this service; {fix}")
            elif self._reload_dnsmasq(why):
                hd.vanished.clear()  # dnsmasq re-read the whole directory
            else:
                self._halt(f"{why}, and dnsmasq could not be reloaded")
        if full and self.halted is not None and not hd.unenforced and not hd.foreign_failed:
            self._resume()
        self._record()

    def _halt(self, why: str) -> None:
        what = (f"{why}: dnsmasq would serve what that file (or the wildcard) still "
                f"allows")
        if not self.control.can_reload:
            self._fail(f"{what}, and no [dnsmasq]control can stop it: exiting so that "
                       f"systemd stops dnsmasq with this service (BindsTo=); {_FIX}, then "
                       f"start ironic-pxe-filter again")
            return
        try:
            self.control.halt()
        except ControlError as exc:
            self._fail(f"{what}, and dnsmasq could not be stopped ({exc}): exiting; {_FIX}")
            return
        self.halted = why
        LOG.critical("%s. dnsmasq STOPPED, no MAC is served; %s. It is started again as "
                     "soon as every denial is written (retried every second)", what, _FIX)

    def _fail(self, message: str) -> None:
        self.fatal = message
        LOG.critical("%s", message)
        self._wake()

    def _resume(self) -> None:
        if not self.started:
            self.halted = None
            return
        if threading.current_thread() is not threading.main_thread():
            return  # a supervised child dies with the thread that forked it: next sync
        try:
            self.control.start()
        except ControlError as exc:
            LOG.error("Every denial is on disk again but dnsmasq could not be started: %s; "
                      "retrying at the next sync", exc)
            return
        LOG.warning("Every denial is on disk again (was: %s): dnsmasq started", self.halted)
        self.halted = None

    def _record(self) -> None:
        hd = self.hostsdir
        parts = []
        if self.fatal is not None:
            parts.append(f"exiting: {self.fatal}")
        elif self.halted is not None:
            parts.append(f"dnsmasq stopped: {self.halted}")
        closed = {name: why for name, why in hd.closed.items() if name != WILDCARD}
        if closed:
            parts.append(f"unknown MACs denied while the denial of {_some(closed)} is "
                         f"not written")
        if hd.unserved:
            parts.append(f"not served: {_some(hd.unserved)}")
        if hd.foreign_failed:
            parts.append(f"cannot remove {_some(hd.foreign_failed)}")
        reason = "; ".join(parts) or None
        if reason == self._reason:
            return
        if reason is None:
            LOG.warning("No longer failing closed: every file is written as the policy says")
        elif self._reason is None:
            LOG.error("Failing closed: %s", reason)
        self._reason = reason
        self.status.set_fail_closed(reason)
