"""The daemon's lifetime: validate, lock, deny-first, sync, start dnsmasq, serve, loop, stop.

:class:`Daemon` checks the configuration and assembles itself complete (every
collaborator in place, nothing to fill in later); :meth:`Daemon.start` then writes the deny
wildcard, runs the first full sync, starts the watcher, dnsmasq and the broadcast listener.
READY=1 (sent by :func:`pxe_filter.common.lifecycle.run`) therefore means the first full sync
is done and dnsmasq was started or told to re-read the hostsdir. dnsmasq's own configuration
is written by ``ironic-pxe-filter render-dnsmasq-config``, never by the daemon.

The main loop is the one writer of decisions read from the database: the periodic full sync,
the MACs, nodes and ports hinted by broadcasts and notifications, and the leases dnsmasq
reports. Each pass pings systemd's watchdog, so only a loop that makes progress keeps the
daemon alive; every database read in it is bounded in time. The database outage rule runs on
a clock of its own (:meth:`Daemon._guard_outage`), so a hung database closes unknown MACs on time.
"""

import logging
import math
import os
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass

from oslo_config import cfg

from pxe_filter import leases
from pxe_filter.common import messaging, prometheus, statedirs, systemd
from pxe_filter.common.config import ConfigError
from pxe_filter.common.database import DatabaseError, check_connection, engine_from_conf
from pxe_filter.common.lifecycle import EXIT_OK, EXIT_RUNTIME, Lifecycle, ServiceError
from pxe_filter.dnsmasq import control as dnsmasq_control
from pxe_filter.dnsmasq.control import Control, ControlError
from pxe_filter.failsafe import FailSafe
from pxe_filter.foreign_files import ForeignReport
from pxe_filter.hostsdir import WILDCARD
from pxe_filter.metrics import FilterMetrics
from pxe_filter.notifications.follower import NotificationFollower
from pxe_filter.notifications.listener import NotificationListener, broker_connection
from pxe_filter.policy import Settings
from pxe_filter.poller import Poller
from pxe_filter.selfheal.healer import SelfHealer
from pxe_filter.selfheal.watcher import HostsdirWatcher
from pxe_filter.source import DatabaseSource, PortView
from pxe_filter.status import recorder as state
from pxe_filter.sync import LEASE, FilterSync, HostsdirSwapped, SyncResult

LOG = logging.getLogger(__name__)

#: Seconds between checks that the hostsdir is still the directory dnsmasq watches
#: (inotify reports a removal at once; a directory mounted over it only shows in a stat).
HOSTSDIR_CHECK = 1.0
#: Seconds between attempts to read hinted MACs while the database fails.
HINT_RETRY = 1.0
#: Least seconds from a full sync of the main loop to one asked for outside the period
#: (deleted nodes, outages).
DUE_SYNC_INTERVAL = 5.0
#: Seconds between saves of the lease book.
LEASE_SAVE_INTERVAL = 5.0
#: A lease granted this many seconds before the filter closed its MAC is the filter's
#: reaction time (logged at WARNING); an older one, or one after, is a served denial.
LEASE_GRACE = 5.0


@dataclass
class Options:
    """The options re-read on SIGHUP."""

    sync_period: int
    settings: Settings
    #: Seconds without an answered read before unknown MACs are denied (0: never).
    outage_deny_unknown: int = 0
    read_timeout: float = 10.0
    poll_interval: float = 1.0
    poll_margin: int = 10
    purge_stale_files: bool = False

    @classmethod
    def read(cls, conf: cfg.ConfigOpts) -> "Options":
        """Read and validate them, warning when they make auto-discovery impossible; raises
        cfg.Error or ValueError."""
        opts = conf.pxe_filter
        options = cls(opts.sync_period, Settings.from_conf(conf),
                      opts.database_outage_deny_unknown, opts.database_read_timeout,
                      opts.poll_interval, opts.poll_margin, opts.purge_stale_files)
        if options.settings.deny_unknown_macs and options.settings.discovery_enabled:
            LOG.warning("[pxe_filter]deny_unknown_macs and [auto_discovery]enabled are both "
                        "true: unknown machines are refused, so auto-discovery cannot work")
        return options


def _check_hostsdir(path: str | None) -> str:
    """The absolute hostsdir; raises ConfigError saying what is wrong."""
    if not path:
        raise ConfigError("[pxe_filter]dhcp_hostsdir is not set: set it to the directory "
                          "dnsmasq reads with --dhcp-hostsdir")
    path = os.path.abspath(path)
    if os.path.islink(path):
        raise ConfigError(f"[pxe_filter]dhcp_hostsdir {path} is a symbolic link: set "
                          f"the option to the directory itself "
                          f"({os.path.realpath(path)}), which is never followed "
                          f"through a link")
    # Made when missing (dnsmasq is started after the first sync, so it watches the directory
    # made here); refused when something else has the name.
    statedirs.ensure_dir(path, statedirs.READABLE, "[pxe_filter]dhcp_hostsdir")
    # os.access alone says yes to root on a read-only mount: create and remove a real file.
    probe = os.path.join(path, f".ironic-pxe-filter.probe.{os.getpid()}.tmp")
    try:
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"[pxe_filter]dhcp_hostsdir {path} is not writable "
                          f"({exc.strerror or exc}): give this service's user write "
                          f"access to it, or check that its file system is not "
                          f"mounted read-only") from None
    return path


def _check_paths(conf: cfg.ConfigOpts, once: bool) -> tuple[str, str, str | None, str | None]:
    """(hostsdir, state file, broadcast URL, notification URL), checked; raises ConfigError,
    cfg.Error or ValueError."""
    hostsdir = _check_hostsdir(conf.pxe_filter.dhcp_hostsdir)
    state_path = state.path_of(conf)
    if os.path.dirname(os.path.abspath(state_path)) == hostsdir \
            and not os.path.basename(state_path).startswith("."):
        raise ConfigError(f"[pxe_filter]state_file {state_path} is in the hostsdir: "
                          f"dnsmasq would read it, and the filter removes every file "
                          f"there it does not manage; name it with a leading dot or "
                          f"put it elsewhere")
    transport_url = None if once else messaging.configured_transport_url(conf)
    notification_url = None
    if conf.pxe_filter.ironic_notifications and not once:
        notification_url = messaging.configured_notification_url(conf)
        if not notification_url:
            raise ConfigError(
                "[pxe_filter]ironic_notifications = true needs Ironic's message bus: set "
                "[oslo_messaging_notifications]transport_url (or [DEFAULT]transport_url)")
        broker_connection(notification_url)  # refuses what cannot work, before anything
    return hostsdir, state_path, transport_url, notification_url


def _open_source(conf: cfg.ConfigOpts, read_timeout: float) -> DatabaseSource:
    """The database, checked to answer; raises ServiceError (ConfigError: no SQLite file)."""
    try:
        engine = engine_from_conf(conf, read_only=True)
    except DatabaseError as exc:
        message = str(exc)
        if "[database]connection" not in message:
            message += ": fix [database]connection"
        raise ConfigError(message) from None
    try:
        check_connection(engine)
    except DatabaseError as exc:
        engine.dispose()
        raise ServiceError(f"{exc}; check [database]connection and that the database "
                           f"server is running") from None
    return DatabaseSource(engine, read_timeout)


class Daemon:
    """One ironic-pxe-filter process, complete from construction: it checks the
    configuration, the database and the hostsdir and takes the hostsdir lock; raises
    ServiceError (ConfigError for configuration mistakes)."""

    def __init__(self, conf: cfg.ConfigOpts, lifecycle: Lifecycle, once: bool = False) -> None:
        self.conf = conf
        self.lifecycle = lifecycle
        self.once = once
        try:
            self.options = options = Options.read(conf)
            hostsdir, state_path, transport_url, notification_url = _check_paths(conf, once)
        except (cfg.Error, ValueError) as exc:
            raise ConfigError(f"invalid configuration: {exc}") from None
        self.source = _open_source(conf, options.read_timeout)
        try:
            self._assemble(hostsdir, state_path, transport_url, notification_url)
        except BaseException:
            self.source.close()
            raise

    def _assemble(self, hostsdir: str, state_path: str, transport_url: str | None,
                  notification_url: str | None) -> None:
        conf, options, once = self.conf, self.options, self.once

        def should_stop() -> bool:
            # Called for every file a sync writes: a long sync still feeds the watchdog.
            self.lifecycle.ping()
            return self.lifecycle.stopping

        try:
            self.sync = sync = FilterSync(self.source, hostsdir, options.settings,
                                          should_stop=should_stop)
        except OSError as exc:
            raise ConfigError(f"[pxe_filter]dhcp_hostsdir {hostsdir} cannot be opened as "
                              f"a directory ({exc.strerror or exc}): point it at the "
                              f"directory itself") from None

        def dnsmasq_exited(message: str) -> None:
            # Called from the supervising thread, only after construction.
            self.status.error(message)
            self.status.dnsmasq_event("restart", message)

        try:
            self.control = Control() if once else dnsmasq_control.from_conf(conf, dnsmasq_exited)
        except ControlError as exc:
            raise ConfigError(str(exc)) from None
        # The default state file is a dotfile in the hostsdir: written relative to the held
        # one, and so is the lease book beside it.
        dir_fd = None if conf.pxe_filter.state_file else (lambda: sync.hostsdir.dir_fd)
        self.status = status = state.StatusRecorder(state_path, hostsdir, sync.figures,
                                                    self.control.describe, dir_fd=dir_fd)
        status.scope = lambda: sync.settings.scope.describe()  # noqa: PLW0108 - SIGHUP
        self.metrics = FilterMetrics(status)
        self.metrics_server = prometheus.MetricsServer(
            self.metrics.registry, conf.pxe_filter.prometheus_host,
            0 if once else conf.pxe_filter.prometheus_port)
        #: Follows Ironic's notifications when [pxe_filter]ironic_notifications is on.
        self.notification_listener: NotificationListener | None = None
        if notification_url:
            follower = NotificationFollower(sync)
            self.notification_listener = NotificationListener(
                notification_url, conf.host, list(conf.pxe_filter.notification_topics),
                follower.handle, expires=conf.pxe_filter.notification_queue_expires,
                max_length=conf.pxe_filter.notification_queue_max_length)
            status.notification_counts = lambda: dict(follower.counts)
        self.listener = None  # no [DEFAULT]transport_url, or --once
        if transport_url:
            from pxe_filter import rpc  # noqa: PLC0415 - oslo.messaging only when configured

            self.listener = rpc.BroadcastListener(transport_url, conf.host, sync,
                                                  after=self.metrics.broadcasts.inc)
        sync.hostsdir.lock()
        #: dnsmasq's lease reports (None: not watched) and each MAC's last DHCP.
        self.lease_spool = None if once else (conf.dnsmasq.lease_report_dir or None)
        self.lease_book = leases.LeaseBook(
            leases.book_path(state_path) if self.lease_spool else None, dir_fd=dir_fd)
        self._warned_purge = False
        self._lease_saved = self._hints_retry_at = self._due_sync_at = 0.0
        self._hints_failing = False
        self._guard_stop = threading.Event()
        self._guard = threading.Thread(target=self._guard_outage, name="database-outage-guard",
                                       daemon=True)
        self.poller = Poller(self.source, sync, lambda: self.options)
        sync.on_broadcast = self._after_broadcast
        sync.on_pending = self.lifecycle.wake
        self.failsafe = FailSafe(sync.hostsdir, self.control, status,
                                 reload_dnsmasq=self._reload_dnsmasq, wake=self.lifecycle.wake)
        sync.after_writes = self.failsafe.after_writes
        sync.after_foreign = self._after_foreign
        self.healer = SelfHealer(sync.hostsdir.path, sync, self.control, status,
                                 reload_dnsmasq=self._reload_dnsmasq,
                                 threshold=conf.dnsmasq.reload_threshold,
                                 wake=self.lifecycle.wake)
        self.watcher: HostsdirWatcher | None = None  # --once
        if not once:
            # Watching before the first sync: nothing changed meanwhile goes unnoticed. Our
            # own renames are announced to it, and it drains the queue as we write.
            self.watcher = HostsdirWatcher(sync.hostsdir.path, self.healer.repair,
                                           self.healer.on_overflow, self.healer.on_lost)
            sync.hostsdir.observer = self.watcher

    # -- start-up ----------------------------------------------------------------------
    def start(self) -> str | int:
        """Deny wildcard, first sync, watcher, dnsmasq, broadcasts; raises ServiceError.

        Returns the READY status, or (with --once, or stopped meanwhile) the exit status.
        """
        hostsdir = self.sync.hostsdir.path
        self._start_metrics()
        try:
            # Until the first sync knows better, no unknown MAC may be served.
            self.sync.write_deny_wildcard()
        except OSError as exc:
            raise ServiceError(f"cannot write the deny wildcard in {hostsdir}: "
                               f"{exc.strerror or exc}") from None
        period = self.options.sync_period
        LOG.info("Managing %s from %s (sync every %s; dnsmasq control: %s)", hostsdir,
                 self.source.describe(), f"{period} s" if period else
                 "never: periodic sync disabled", self.control.name)
        LOG.info("Serving %s", self.options.settings.scope.describe())
        result = self._first_sync()
        if self.failsafe.fatal:
            raise ServiceError(self.failsafe.fatal)
        if self.once or self.lifecycle.stopping:
            return EXIT_RUNTIME if result.failed else EXIT_OK
        self.watcher.start()  # there is one: not --once
        self._guard.start()
        self._start_dnsmasq()
        if not self.lifecycle.stopping:
            self._start_listener()
            if self.notification_listener is not None:
                self.notification_listener.start()
        return (f"{result.allowed} MAC(s) allowed, {result.denied} denied, unknown "
                f"{'allowed' if result.unknown_allowed else 'denied'}")

    def _first_sync(self) -> SyncResult:
        try:
            result = self.sync.full_sync()
        except DatabaseError as exc:
            raise ServiceError(f"first sync failed: {exc}; check [database]connection points "
                               f"at an Ironic database or one made by 'ironic-inspection "
                               f"dbsync'") from None
        except OSError as exc:
            raise ServiceError(f"first sync failed: cannot read {self.sync.hostsdir.path}: "
                               f"{exc.strerror or exc}") from None
        except HostsdirSwapped as exc:
            raise ServiceError(f"first sync refused: {exc}: point [pxe_filter]dhcp_hostsdir "
                               f"at the directory itself") from None
        self._after_sync(result, first=True)
        return result

    def _start_metrics(self) -> None:
        try:
            self.metrics_server.start()
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on [pxe_filter]prometheus_host:prometheus_port "
                f"{self.conf.pxe_filter.prometheus_host}:{self.conf.pxe_filter.prometheus_port}"
                f": {exc.strerror or exc}") from None

    def _start_dnsmasq(self) -> None:
        """After the first sync: start dnsmasq, or make a running one re-read everything."""
        self.failsafe.started = True
        if self.failsafe.halted is not None:
            LOG.critical("dnsmasq not started: %s; it is started as soon as every denial "
                         "is written (retried every second)", self.failsafe.halted)
            return
        try:
            self.control.start()
        except ControlError as exc:
            raise ServiceError(f"{exc}; the hostsdir is synced, fix [dnsmasq] and restart "
                               f"ironic-pxe-filter") from None
        if self.control.can_reload:
            LOG.info("dnsmasq started or reloaded after the first sync (%s)", self.control.name)

    def _start_listener(self) -> None:
        if self.listener is None:
            return
        try:
            self.listener.start()
        except Exception as exc:  # driver-specific exception types
            raise ServiceError(f"cannot listen for broadcasts on [DEFAULT]transport_url: "
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
            self.status.error(f"dnsmasq reload failed: {exc}", write=True)
            return False
        LOG.info("dnsmasq %s after %s", "reloaded" if outcome == dnsmasq_control.RELOADED
                 else "not running, nothing to reload", reason)
        if outcome == dnsmasq_control.RELOADED:
            self.status.dnsmasq_event("reload", reason)
        return True

    def _purge_stale(self, result: SyncResult) -> None:
        if not self.options.purge_stale_files:
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
            self.status.error(f"purge undone: {exc}")
        except OSError as exc:
            LOG.error("Purge failed: %s", exc.strerror or exc)

    def _after_sync(self, result: SyncResult, first: bool = False) -> None:
        if result.reopened:
            LOG.warning("The database answers again: unknown MACs follow the policy again "
                        "(%s)", "allowed" if result.unknown_allowed else "denied")
        self._purge_stale(result)
        if not first and result.written > self.conf.dnsmasq.reload_threshold:
            self._reload_dnsmasq(f"a sync rewrote {result.written} files")
        elif result.purged:
            self.status.dnsmasq_event("reload", f"purged {result.purged} file(s)")
        changed = first or result.written or result.failed or result.fenced
        LOG.log(logging.INFO if changed else logging.DEBUG, "%s sync: %s",
                "First" if first else "Full", result.summary())
        if result.interrupted:
            LOG.info("Sync interrupted by shutdown")
        systemd.notify(f"STATUS={result.allowed} MAC(s) allowed, {result.denied} denied, "
                       f"unknown {'allowed' if result.unknown_allowed else 'denied'}, "
                       f"{result.failed} file(s) failing")
        self.metrics.sync(result)
        self.status.sync(result, first)

    def _after_foreign(self, report: ForeignReport) -> None:
        path = self.sync.hostsdir.path
        for name in report.removed:
            LOG.warning("Removed %s: the filter did not write it, and dnsmasq would apply "
                        "it; keep nothing but the filter's files in the hostsdir",
                        os.path.join(path, name))
        for name in report.neutralised:
            LOG.warning("Emptied %s: the filter did not write it and cannot delete it; "
                        "delete it by hand", os.path.join(path, name))
        for name in report.gone:
            LOG.warning("%s, a file the filter did not write, was deleted by someone else; "
                        "dnsmasq applies it until it is reloaded", os.path.join(path, name))
        if self.once and report.reload_needed:
            LOG.warning("A running dnsmasq applies the removed files until it is reloaded: "
                        "send it SIGHUP")
        self.metrics.foreign(report)
        if report.removed or report.neutralised:
            shown = ", ".join([*report.removed, *report.neutralised][:3])
            self.status.error(f"file(s) the filter did not write found in the hostsdir: "
                              f"{shown}")
        self.failsafe.after_foreign(report)

    def _after_broadcast(self, result: SyncResult) -> None:
        self._reload_beyond_threshold(result)
        self.metrics.broadcast(result)
        self.status.broadcast(result)

    def _reload_beyond_threshold(self, result: SyncResult) -> None:
        if result.written > self.conf.dnsmasq.reload_threshold:
            self._reload_dnsmasq(f"{result.written} files rewritten at once")

    # -- running -----------------------------------------------------------------------
    def run_loop(self) -> None:
        """Sync every sync_period, read hinted MACs as they come, watch dnsmasq's leases,
        until asked to stop; SIGHUP reloads and resyncs."""
        life = self.lifecycle
        next_sync = time.monotonic() + (self.options.sync_period or math.inf)
        while not life.stopping:
            # New hints and a lost hostsdir end the wait at once (on_pending, on_lost wake).
            life.wait(min(HOSTSDIR_CHECK, max(next_sync - time.monotonic(), 0),
                          *(t for t in (systemd.watchdog_interval(), self.poller.wait())
                            if t is not None)))
            if life.stopping:
                break
            if self.failsafe.fatal:
                raise ServiceError(self.failsafe.fatal)
            life.ping(force=True)
            if self.healer.check_hostsdir():
                self.watcher.rewatch(self.sync.hostsdir.path)
            self._retry_failed()
            self.poller.poll()
            self._reconcile()
            self._check_leases()
            now = time.monotonic()
            if life.reload_requested:
                self._reload()
            elif now >= next_sync or (self.sync.full_sync_due and now >= self._due_sync_at):
                # One asked for outside the period waits DUE_SYNC_INTERVAL after this one.
                self._due_sync_at = now + DUE_SYNC_INTERVAL
                self._periodic_sync()
            else:
                continue
            next_sync = time.monotonic() + (self.options.sync_period or math.inf)

    def _reconcile(self, leased: Collection[str] = ()) -> SyncResult | None:
        """Read what broadcasts and notifications hinted at (and ``leased`` MACs, at once:
        not held back by a failing read), and write what it says; None if nothing was."""
        if not leased and (not self.sync.pending or time.monotonic() < self._hints_retry_at):
            return None
        try:
            result = self.sync.reconcile_pending(leased)
        except DatabaseError as exc:
            self._hints_retry_at = time.monotonic() + HINT_RETRY
            # Once per outage: the retries every second would flood the log.
            LOG.log(logging.DEBUG if self._hints_failing else logging.WARNING,
                    "Hinted MACs not read, their allows wait (denies are applied): %s; "
                    "retrying every %.0f s", exc, HINT_RETRY)
            self._hints_failing = True
            return None
        if self._hints_failing:
            LOG.info("Hinted MACs read: the database answers again")
            self._hints_failing = False
        if result is not None:
            self._reload_beyond_threshold(result)
            self.metrics.written(result)
        return result

    # -- dnsmasq's own answers ---------------------------------------------------------
    def _check_leases(self) -> None:
        """Read dnsmasq's lease reports; a lease to a MAC the database denies is closed."""
        if self.lease_spool is None:
            return
        found = leases.read_spool(self.lease_spool)
        for lease in found:
            LOG.debug("dnsmasq leased %s to %s (%s)", lease.address, lease.mac or "a client "
                      "whose MAC it does not know", lease.action)
            self.lease_book.record(lease)
        wanted = {lease.mac for lease in found if lease.mac is not None}
        if wanted:
            self._judge_leases(found, wanted)
        if time.monotonic() - self._lease_saved >= LEASE_SAVE_INTERVAL:
            self._lease_saved = time.monotonic()
            self.lease_book.save()

    def _judge_leases(self, found: list[leases.Lease], wanted: set[str]) -> None:
        # When each was closed before this read: the read itself closes what the database
        # denies now, which is no reaction time of the filter's.
        closed_at = {name: self.sync.closed_at.get(name, 0.0) for name in (*wanted, WILDCARD)}
        result = self._reconcile(wanted)  # the database now, applied to the held policy
        ports = {} if result is None else result.ports
        source = "the held policy (the database does not answer)" if result is None \
            else "the database"
        desired = self.sync.desired
        closed: set[str] = set()
        for lease in found:
            mac = lease.mac
            if mac is None or desired is None or desired.decision(mac) or mac in closed:
                continue
            shut = max(closed_at[mac], closed_at[WILDCARD])
            if 0 <= shut - lease.time <= LEASE_GRACE:
                LOG.warning("dnsmasq gave %s a lease (%s) %.0f s before the filter closed "
                            "it: %s denies it now, and so do the files", mac, lease.address,
                            shut - lease.time, source)
                continue
            closed.add(mac)
            self._served_denied(mac, lease, source, ports.get(mac))

    def _served_denied(self, mac: str, lease: leases.Lease, source: str,
                       port: PortView | None) -> None:
        LOG.critical("dnsmasq served a MAC %s denies: %s got %s (%s at %s), node %s (%s). "
                     "Closing it now: its file rewritten to deny and dnsmasq reloaded. Find "
                     "how it was allowed: 'ironic-pxe-filter explain %s', the files and "
                     "dnsmasq's configuration", source, mac, lease.address,
                     "a new lease" if lease.action == "add" else "a renewal",
                     time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(lease.time)),
                     (port and port.node_uuid) or "none",
                     (port and port.provision_state) or "no port", mac)
        self.metrics.served_denied.inc()
        self.status.error(f"dnsmasq served denied MAC {mac} ({lease.address}); closed",
                          write=True)
        # Whatever the files say (a write that fails fails closed in the writer), then
        # reloaded: dnsmasq keeps what it read.
        self.sync.hint(deny=[mac], origin=LEASE, rewrite=True)
        self._reload_dnsmasq(f"a lease to denied MAC {mac}")

    def _retry_failed(self) -> None:
        """While failing closed, retry the failed files every second, not every sync."""
        if not self.sync.hostsdir.failing:
            return
        try:
            self.sync.converge(failing_only=True)
        except OSError as exc:
            LOG.debug("Retry of the failed files: cannot list the hostsdir: %s", exc)

    def _reload(self) -> None:
        """SIGHUP: re-read the configuration files, resync, reload dnsmasq."""
        self.lifecycle.reload_requested = False
        systemd.notify("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}",
                       "STATUS=reloading configuration and resyncing")
        LOG.info("SIGHUP: re-reading the configuration files")
        try:
            self.conf.mutate_config_files()
            options = Options.read(self.conf)
        except (cfg.Error, ValueError, SystemExit) as exc:
            LOG.error("Configuration not reloaded, keeping the previous options: %s; fix the "
                      "file and send SIGHUP again", exc)
        else:
            self.options = options
            self.source.read_timeout = options.read_timeout
            self.sync.settings = options.settings
            self.sync.reread_files()
            LOG.info("Serving %s", options.settings.scope.describe())
        self._periodic_sync()
        self._reload_dnsmasq("SIGHUP")
        allowed, denied, _ = self.sync.figures()
        systemd.notify("READY=1", f"STATUS=reloaded: {allowed} MAC(s) allowed, {denied} denied")

    def _guard_outage(self) -> None:
        """Close unknown MACs once the database has left a read unanswered for the configured
        limit, on a thread of its own: a read hung in the main loop cannot hold it up."""
        while not self._guard_stop.wait(1.0):
            limit, down = self.options.outage_deny_unknown, self.source.unanswered_for()
            # Once per outage: a full sync, which needs the database, ends it.
            if limit and down >= limit and self.sync.closed_unknown is None:
                self._close_unknown_after_outage(down)

    def _close_unknown_after_outage(self, down: float) -> None:
        """The outage guard's verdict: deny MACs of no port until the database answers."""
        why = f"the database has not answered for {down:.0f} s"
        rewritten = self.sync.close_unknown(why)
        self.sync.full_sync_due = True  # a full sync reopens them once it answers
        LOG.error("%s ([pxe_filter]database_outage_deny_unknown = %d): MACs of no port are "
                  "denied until the database answers again%s; machines with a port keep "
                  "their last verdict, denies still apply, and new machines cannot be "
                  "discovered meanwhile", why.capitalize(), self.options.outage_deny_unknown,
                  "" if rewritten else " (they already were)")
        self.status.error(f"{why}: unknown MACs denied until the database answers",
                          write=True)

    def _periodic_sync(self) -> None:
        try:
            result = self.sync.full_sync()
        except DatabaseError as exc:
            LOG.error("Sync skipped, files left as they are: %s; check [database]connection "
                      "and the database server; retrying at the next sync", exc)
            systemd.notify(f"STATUS=database error, retrying: {exc}"[:400])
            self.status.error(f"database error: {exc}", write=True)
            return
        except OSError as exc:
            LOG.error("Sync failed: cannot list %s: %s; retrying at the next sync",
                      self.sync.hostsdir.path, exc.strerror or exc)
            self.status.error(f"cannot list the hostsdir: {exc.strerror or exc}", write=True)
            return
        except HostsdirSwapped:
            self.lifecycle.wake()  # the main loop's next pass restores it (check_hostsdir)
            return
        self._after_sync(result)

    def shutdown(self) -> None:
        """Stop serving broadcasts and watching, stop a dnsmasq we run, release the lock."""
        for consumer in (self.notification_listener, self.listener):
            if consumer is not None:
                consumer.stop()
        self._guard_stop.set()
        if self._guard.is_alive():
            self._guard.join(5)
        self.lease_book.save()
        if self.watcher is not None:
            self.watcher.stop()
        self.control.stop()
        self.metrics_server.stop()
        if self.status.data.get("ready"):
            self.status.stopped()
        self.sync.hostsdir.unlock()
        self.source.close()
