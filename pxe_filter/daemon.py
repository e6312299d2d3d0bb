"""The daemon's lifetime: validate, lock, deny-first, sync, start dnsmasq, serve, loop, stop.

A plain main loop rather than oslo.service's launcher, which tells systemd READY before the
service has started and respawns a failing one forever (FACTS.md). READY=1 here means the
first full sync is done and dnsmasq was started (or told to re-read the hostsdir).
"""

import contextlib
import logging
import os
import select
import signal
import time

from oslo_config import cfg

from pxe_filter import state
from pxe_filter.checks import (  # noqa: F401 - re-exported for callers of the old home
    LOCK_NAME,
    FatalConfigError,
    FatalError,
    HostsdirLock,
    check_hostsdir,
    check_sqlite_file,
    warn_conflicts,
)
from pxe_filter.common import messaging, systemd
from pxe_filter.common.database import DatabaseError, check_connection, engine_from_conf
from pxe_filter.dnsmasq import control as dnsmasq_control
from pxe_filter.dnsmasq.control import Control, ControlError
from pxe_filter.healing import SelfHealing, identity
from pxe_filter.selfheal import HostsdirWatcher
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import BroadcastResult, FilterSync, SyncResult

LOG = logging.getLogger(__name__)

#: Seconds between checks that the hostsdir is still the directory dnsmasq watches
#: (inotify reports a removal at once; a directory mounted over it only shows in a stat).
HOSTSDIR_CHECK = 1.0


def _monotonic_usec() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


class Daemon(SelfHealing):
    """One ironic-pxe-filter process."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self.stopping = False
        self.reload_requested = False
        self.sync: FilterSync | None = None
        self.server = None
        self.engine = None
        self.lock: HostsdirLock | None = None
        self.control: Control = Control()
        self.watcher: HostsdirWatcher | None = None
        self.status: state.StatusRecorder | None = None
        self.hostsdir: str | None = None
        self._hostsdir_id: tuple[int, int] | None = None
        self._lost: str | None = None
        self._warned_purge = False
        self._last_ping = 0.0
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    # -- signals -----------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT stop, SIGHUP reloads; both also wake the main loop."""
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_stop(self, signum, _frame) -> None:
        # Only flags here: the main loop and the file writer check them.
        self.stopping = True

    def _on_hup(self, _signum, _frame) -> None:
        self.reload_requested = True

    def _should_stop(self) -> bool:
        # Called for every file a sync writes: a long sync still feeds the watchdog.
        self._ping()
        return self.stopping

    def _ping(self) -> None:
        interval = systemd.watchdog_interval()
        now = time.monotonic()
        if interval is not None and now - self._last_ping >= min(interval / 2, 1.0):
            self._last_ping = now
            systemd.notify("WATCHDOG=1")

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"w")

    # -- start-up ----------------------------------------------------------------------
    def _options(self) -> tuple[int, list[str], bool, bool]:
        try:
            opts = self.conf.pxe_filter
            return (opts.sync_period, list(opts.supported_inspect_interfaces),
                    self.conf.auto_discovery.enabled, opts.deny_unknown_macs)
        except (cfg.Error, ValueError) as exc:
            raise FatalConfigError(f"invalid configuration: {exc}") from None

    def _threshold(self) -> int:
        return self.conf.dnsmasq.reload_threshold

    def start(self, once: bool = False) -> SyncResult:
        """Validate, lock, deny wildcard, first sync, start dnsmasq; raises FatalError."""
        period, interfaces, discovery, deny_unknown = self._options()
        try:
            hostsdir = check_hostsdir(self.conf.pxe_filter.dhcp_hostsdir)
            state_path = self.conf.pxe_filter.state_file or state.default_path(hostsdir)
            if not once:
                self.control = dnsmasq_control.from_conf(self.conf, self._dnsmasq_exited)
        except cfg.Error as exc:
            raise FatalConfigError(f"invalid configuration: {exc}") from None
        except ControlError as exc:
            raise FatalConfigError(str(exc)) from None
        self.hostsdir = hostsdir
        check_sqlite_file(self.conf.database.connection)
        try:
            self.engine = engine_from_conf(self.conf, read_only=True)
        except DatabaseError as exc:
            message = str(exc)
            if "[database]connection" not in message:
                message += ": fix [database]connection"
            raise FatalConfigError(message) from None
        try:
            check_connection(self.engine)
        except DatabaseError as exc:
            raise FatalError(f"{exc}; check [database]connection and that the database "
                             f"server is running") from None
        transport_url = None if once else self._transport_url()
        self.lock = HostsdirLock(hostsdir)
        self.lock.acquire()
        warn_conflicts(discovery, deny_unknown)
        self.sync = FilterSync(DatabaseSource(self.engine), hostsdir,
                               supported_interfaces=interfaces,
                               discovery_enabled=discovery, deny_unknown_macs=deny_unknown,
                               should_stop=self._should_stop)
        self.sync.on_broadcast = self._after_broadcast
        self.status = state.StatusRecorder(state_path, hostsdir, self.sync.figures,
                                           self.control.describe)
        try:
            # Until the first sync knows better, no unknown MAC may be served.
            self.sync.write_deny_wildcard()
        except OSError as exc:
            raise FatalError(f"cannot write the deny wildcard in {hostsdir}: "
                             f"{exc.strerror or exc}") from None
        LOG.info("Managing %s from %s (sync every %s; dnsmasq control: %s)", hostsdir,
                 self.engine.url.render_as_string(hide_password=True),
                 f"{period} s" if period else "never: periodic sync disabled",
                 self.control.name)
        if not once:
            # Watching before the first sync: nothing changed meanwhile goes unnoticed.
            self._hostsdir_id = identity(hostsdir)
            self.watcher = HostsdirWatcher(hostsdir, self._repair, self._on_overflow,
                                           self._on_lost)
            # Our own renames are announced to it, and it drains the queue as we write.
            self.sync.hostsdir.observer = self.watcher
        result = self._first_sync()
        if once or self.stopping:
            return result
        self.watcher.start()
        self._start_dnsmasq()
        if transport_url and not self.stopping:
            self._start_rpc(transport_url)
        return result

    def _transport_url(self) -> str | None:
        try:
            return messaging.configured_transport_url(self.conf)
        except (cfg.Error, ValueError) as exc:
            raise FatalConfigError(f"invalid [DEFAULT]transport_url: {exc}") from None

    def _first_sync(self) -> SyncResult:
        assert self.sync is not None
        try:
            result = self.sync.full_sync()
        except DatabaseError as exc:
            raise FatalError(f"first sync failed: {exc}; check [database]connection points at "
                             f"an Ironic database or one made by 'ironic-inspection "
                             f"dbsync'") from None
        except OSError as exc:
            raise FatalError(f"first sync failed: cannot read {self.sync.hostsdir.path}: "
                             f"{exc.strerror or exc}") from None
        self._after_sync(result, first=True)
        return result

    def _start_dnsmasq(self) -> None:
        """After the first sync: start dnsmasq, or make a running one re-read everything."""
        try:
            self.control.start()
        except ControlError as exc:
            raise FatalError(f"{exc}; the hostsdir is synced, fix [dnsmasq] and restart "
                             f"ironic-pxe-filter") from None
        if self.control.can_reload:
            LOG.info("dnsmasq started or reloaded after the first sync (%s)", self.control.name)

    def _start_rpc(self, url: str) -> None:
        from pxe_filter import rpc  # noqa: PLC0415 - oslo.messaging only when configured

        try:
            transport = messaging.get_transport(url)
            self.server = rpc.start_server(transport, self.conf.host, self.sync)
        except Exception as exc:  # driver-specific exception types
            raise FatalError(f"cannot listen for broadcasts on [DEFAULT]transport_url: "
                             f"{exc}") from None
        LOG.info("Listening for update_pxe_filters broadcasts as server %s", self.conf.host)

    # -- dnsmasq -----------------------------------------------------------------------
    def _reload_dnsmasq(self, reason: str) -> bool:
        """SIGHUP dnsmasq through the control; False (logged) if it could not be done."""
        if not self.control.can_reload:
            return False
        try:
            outcome = self.control.reload()
        except ControlError as exc:
            LOG.error("dnsmasq not reloaded after %s: %s", reason, exc)
            if self.status is not None:
                self.status.error(f"dnsmasq reload failed: {exc}", write=True)
            return False
        LOG.info("dnsmasq %s after %s", "reloaded" if outcome == dnsmasq_control.RELOADED
                 else "not running, nothing to reload", reason)
        if outcome == dnsmasq_control.RELOADED and self.status is not None:
            self.status.dnsmasq_event("reload", reason)
        return True

    def _dnsmasq_exited(self, message: str) -> None:
        if self.status is not None:
            self.status.error(message)
            self.status.dnsmasq_event("restart", message)

    def _purge_stale(self, result: SyncResult) -> None:
        if not self.conf.pxe_filter.purge_stale_files or self.sync is None:
            return
        if not self.control.can_reload:
            if not self._warned_purge:
                LOG.warning("[pxe_filter]purge_stale_files ignored: deleting a file needs a "
                            "dnsmasq reload right after it; set [dnsmasq]control")
                self._warned_purge = True
            return

        def reload() -> None:
            self.control.reload()  # NOT_RUNNING is fine: a new dnsmasq reads the directory

        try:
            result.purged = self.sync.purge_stale(reload)
        except ControlError as exc:
            LOG.error("Purge undone (files written back): dnsmasq could not be reloaded: %s",
                      exc)
            if self.status is not None:
                self.status.error(f"purge undone: {exc}")
        except OSError as exc:
            LOG.error("Purge failed: %s", exc.strerror or exc)

    def _after_sync(self, result: SyncResult, first: bool = False) -> None:
        self._purge_stale(result)
        if not first and result.written > self._threshold():
            self._reload_dnsmasq(f"a sync rewrote {result.written} files")
        elif result.purged and self.status is not None:
            self.status.dnsmasq_event("reload", f"purged {result.purged} file(s)")
        self._log_sync(result, first)
        if self.status is not None:
            self.status.sync(result, first)

    def _after_broadcast(self, result: BroadcastResult) -> None:
        if result.written > self._threshold():
            self._reload_dnsmasq(f"a broadcast rewrote {result.written} files")
        if self.status is not None:
            self.status.broadcast(result)

    # -- running -----------------------------------------------------------------------
    def run_loop(self) -> None:
        """Sync every sync_period until asked to stop; SIGHUP reloads and resyncs."""
        period = self._options()[0]
        next_sync = time.monotonic() + period if period else None
        while not self.stopping:
            now = time.monotonic()
            timeouts = [t for t in (systemd.watchdog_interval(), HOSTSDIR_CHECK,
                                    None if next_sync is None else max(next_sync - now, 0))
                        if t is not None]
            self._wait(min(timeouts))
            if self.stopping:
                break
            self._last_ping = time.monotonic()
            if systemd.watchdog_interval() is not None:
                systemd.notify("WATCHDOG=1")
            self._check_hostsdir()
            if self.reload_requested:
                self.reload_requested = False
                systemd.notify("RELOADING=1", f"MONOTONIC_USEC={_monotonic_usec()}",
                               "STATUS=reloading configuration and resyncing")
                period = self._reload(period)
                self._periodic_sync()
                self._reload_dnsmasq("SIGHUP")
                allowed, denied, _ = self.sync.figures() if self.sync else (0, 0, None)
                systemd.notify("READY=1", f"STATUS=reloaded: {allowed} MAC(s) allowed, "
                                          f"{denied} denied")
            elif next_sync is None or time.monotonic() < next_sync:
                continue
            else:
                self._periodic_sync()
            next_sync = time.monotonic() + period if period else None

    def _wait(self, timeout: float | None) -> None:
        if self.reload_requested or self.stopping or self._lost:
            return
        with contextlib.suppress(InterruptedError):
            select.select([self._wake_r], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 64):
                pass

    def _reload(self, period: int) -> int:
        LOG.info("SIGHUP: re-reading the configuration files")
        try:
            self.conf.mutate_config_files()
            new_period, interfaces, discovery, deny_unknown = self._options()
        except (cfg.Error, ValueError, SystemExit, FatalError) as exc:
            LOG.error("Configuration not reloaded, keeping the previous options: %s; fix the "
                      "file and send SIGHUP again", exc)
            return period
        assert self.sync is not None
        self.sync.configure(supported_interfaces=interfaces, discovery_enabled=discovery,
                            deny_unknown_macs=deny_unknown)
        self.sync.reread_files()
        warn_conflicts(discovery, deny_unknown)
        return new_period

    def _periodic_sync(self) -> None:
        assert self.sync is not None
        try:
            result = self.sync.full_sync()
        except DatabaseError as exc:
            LOG.error("Sync skipped, files left as they are: %s; check [database]connection "
                      "and the database server; retrying at the next sync", exc)
            systemd.notify(f"STATUS=database error, retrying: {exc}"[:400])
            if self.status is not None:
                self.status.error(f"database error: {exc}", write=True)
            return
        except OSError as exc:
            LOG.error("Sync failed: cannot list %s: %s; retrying at the next sync",
                      self.sync.hostsdir.path, exc.strerror or exc)
            if self.status is not None:
                self.status.error(f"cannot list the hostsdir: {exc.strerror or exc}",
                                  write=True)
            return
        self._after_sync(result)

    def _log_sync(self, result: SyncResult, first: bool = False) -> None:
        changed = first or result.written or result.failed or result.kept_broadcasts
        LOG.log(logging.INFO if changed else logging.DEBUG, "%s sync: %s",
                "First" if first else "Full", result.summary())
        if result.interrupted:
            LOG.info("Sync interrupted by shutdown")
        systemd.notify(f"STATUS={result.allowed} MAC(s) allowed, {result.denied} denied, "
                       f"unknown {'allowed' if result.unknown_allowed else 'denied'}, "
                       f"{result.failed} file(s) failing")

    def shutdown(self) -> None:
        """Stop serving broadcasts and watching, stop a dnsmasq we run, release the lock."""
        systemd.notify("STOPPING=1", "STATUS=stopping")
        # A repeated SIGTERM must not kill the process with the default action, which
        # Python reinstates for its own handlers while the interpreter finalises.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        if self.server is not None:
            from pxe_filter import rpc  # noqa: PLC0415

            with contextlib.suppress(Exception):
                rpc.stop_server(self.server)
            self.server = None
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        self.control.stop()
        if self.status is not None and self.status.data.get("ready"):
            self.status.stopped()
        if self.lock is not None:
            self.lock.release()
        if self.engine is not None:
            self.engine.dispose()
