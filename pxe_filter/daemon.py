"""The daemon's lifetime: validate, lock, deny-first, sync, serve broadcasts, loop, stop.

A plain main loop rather than oslo.service's launcher, which tells systemd READY before the
service has started and respawns a failing one forever (FACTS.md). READY=1 here means the
first full sync is done.
"""

import contextlib
import fcntl
import logging
import os
import select
import signal
import time

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import make_url

from inspection.common import messaging, systemd
from inspection.db.engine import DatabaseError, check_connection, engine_from_conf
from pxe_filter.sync import FilterSync, SyncResult

LOG = logging.getLogger(__name__)

LOCK_NAME = ".ironic-pxe-filter.lock"


class FatalError(Exception):
    """Start-up cannot continue; the message says what to fix."""

    exit_code = 1


class FatalConfigError(FatalError):
    """The configuration is wrong."""

    exit_code = 2


def check_hostsdir(path: str | None) -> str:
    """Return the absolute hostsdir, or raise FatalConfigError saying what is wrong."""
    if not path:
        raise FatalConfigError("[pxe_filter]dhcp_hostsdir is not set: set it to the directory "
                               "dnsmasq reads with --dhcp-hostsdir")
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise FatalConfigError(f"[pxe_filter]dhcp_hostsdir {path} does not exist: create it "
                               f"(the directory dnsmasq's --dhcp-hostsdir names) or fix "
                               f"the option")
    if not os.path.isdir(path):
        raise FatalConfigError(f"[pxe_filter]dhcp_hostsdir {path} is not a directory: point "
                               f"it at the directory dnsmasq's --dhcp-hostsdir names")
    # os.access alone says yes to root on a read-only mount: create and remove a real file.
    probe = os.path.join(path, f".ironic-pxe-filter.probe.{os.getpid()}.tmp")
    try:
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise FatalConfigError(f"[pxe_filter]dhcp_hostsdir {path} is not writable "
                               f"({exc.strerror or exc}): give this service's user write "
                               f"access to it, or check that its file system is not "
                               f"mounted read-only") from None
    return path


def _check_sqlite_file(url: str) -> None:
    """Refuse a missing SQLite file: connecting would create an empty database."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        return  # reported with the right wording by engine_from_conf
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    if not os.path.exists(parsed.database):
        raise FatalConfigError(f"SQLite database {parsed.database} does not exist: create it "
                               f"with 'ironic-inspection dbsync' or fix [database]connection")


def _warn_conflicts(discovery: bool, deny_unknown: bool) -> None:
    if deny_unknown and discovery:
        LOG.warning("[pxe_filter]deny_unknown_macs and [auto_discovery]enabled are both "
                    "true: unknown machines are refused, so auto-discovery cannot work")


class HostsdirLock:
    """An flock on a dotfile in the hostsdir, held for the daemon's lifetime."""

    def __init__(self, hostsdir: str) -> None:
        self.path = os.path.join(hostsdir, LOCK_NAME)
        self.hostsdir = hostsdir
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise FatalError naming the daemon that holds it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o644)
        except OSError as exc:
            raise FatalError(f"cannot open lock file {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise FatalError(f"another ironic-pxe-filter (pid {owner}) already manages "
                             f"{self.hostsdir} (lock {self.path}): stop it, or give this one "
                             f"its own [pxe_filter]dhcp_hostsdir") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        """Release the lock (the file stays: removing it would race with a new owner)."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            os.close(self.fd)
            self.fd = None


class Daemon:
    """One ironic-pxe-filter process."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self.stopping = False
        self.reload_requested = False
        self.sync: FilterSync | None = None
        self.server = None
        self.engine = None
        self.lock: HostsdirLock | None = None
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
        return self.stopping

    # -- start-up ----------------------------------------------------------------------
    def _options(self) -> tuple[int, list[str], bool, bool]:
        try:
            opts = self.conf.pxe_filter
            return (opts.sync_period, list(opts.supported_inspect_interfaces),
                    self.conf.auto_discovery.enabled, opts.deny_unknown_macs)
        except (cfg.Error, ValueError) as exc:
            raise FatalConfigError(f"invalid configuration: {exc}") from None

    def start(self, once: bool = False) -> SyncResult:
        """Validate, lock, write the deny wildcard, run the first sync; raises FatalError."""
        period, interfaces, discovery, deny_unknown = self._options()
        try:
            hostsdir = check_hostsdir(self.conf.pxe_filter.dhcp_hostsdir)
        except cfg.Error as exc:
            raise FatalConfigError(f"invalid configuration: {exc}") from None
        _check_sqlite_file(self.conf.database.connection)
        try:
            self.engine = engine_from_conf(self.conf)
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
        _warn_conflicts(discovery, deny_unknown)
        self.sync = FilterSync(self.engine, hostsdir, supported_interfaces=interfaces,
                               discovery_enabled=discovery, deny_unknown_macs=deny_unknown,
                               should_stop=self._should_stop)
        try:
            # Until the first sync knows better, no unknown MAC may be served.
            self.sync.write_deny_wildcard()
        except OSError as exc:
            raise FatalError(f"cannot write the deny wildcard in {hostsdir}: "
                             f"{exc.strerror or exc}") from None
        LOG.info("Managing %s from %s (sync every %s)", hostsdir,
                 self.engine.url.render_as_string(hide_password=True),
                 f"{period} s" if period else "never: periodic sync disabled")
        result = self._first_sync()
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
        self._log_sync(result, first=True)
        return result

    def _start_rpc(self, url: str) -> None:
        from pxe_filter import rpc  # noqa: PLC0415 - oslo.messaging only when configured

        try:
            transport = messaging.get_transport(url)
            self.server = rpc.start_server(transport, self.conf.host, self.sync)
        except Exception as exc:  # driver-specific exception types
            raise FatalError(f"cannot listen for broadcasts on [DEFAULT]transport_url: "
                             f"{exc}") from None
        LOG.info("Listening for update_pxe_filters broadcasts as server %s", self.conf.host)

    # -- running -----------------------------------------------------------------------
    def run_loop(self) -> None:
        """Sync every sync_period until asked to stop; SIGHUP reloads and resyncs."""
        period = self._options()[0]
        next_sync = time.monotonic() + period if period else None
        while not self.stopping:
            now = time.monotonic()
            timeouts = [t for t in (systemd.watchdog_interval(),
                                    None if next_sync is None else max(next_sync - now, 0))
                        if t is not None]
            self._wait(min(timeouts) if timeouts else None)
            if self.stopping:
                break
            systemd.notify("WATCHDOG=1")
            if self.reload_requested:
                self.reload_requested = False
                period = self._reload(period)
            elif next_sync is None or time.monotonic() < next_sync:
                continue
            self._periodic_sync()
            next_sync = time.monotonic() + period if period else None

    def _wait(self, timeout: float | None) -> None:
        if self.reload_requested or self.stopping:
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
        _warn_conflicts(discovery, deny_unknown)
        return new_period

    def _periodic_sync(self) -> None:
        assert self.sync is not None
        try:
            result = self.sync.full_sync()
        except DatabaseError as exc:
            LOG.error("Sync skipped, files left as they are: %s; check [database]connection "
                      "and the database server; retrying at the next sync", exc)
            systemd.notify(f"STATUS=database error, retrying: {exc}"[:400])
            return
        except OSError as exc:
            LOG.error("Sync failed: cannot list %s: %s; retrying at the next sync",
                      self.sync.hostsdir.path, exc.strerror or exc)
            return
        self._log_sync(result)

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
        """Stop serving broadcasts, release the lock and the database."""
        systemd.notify("STOPPING=1")
        # A repeated SIGTERM must not kill the process with the default action, which
        # Python reinstates for its own handlers while the interpreter finalises.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        if self.server is not None:
            from pxe_filter import rpc  # noqa: PLC0415

            with contextlib.suppress(Exception):
                rpc.stop_server(self.server)
            self.server = None
        if self.lock is not None:
            self.lock.release()
        if self.engine is not None:
            self.engine.dispose()

