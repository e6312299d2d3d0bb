"""One service process's life: signals, a wake-up pipe, systemd notifications, exit codes.

The filter, the API and the worker share it. oslo.service's launcher is not used: it tells
systemd READY before the service has started, respawns a failing start forever and sends no
watchdog pings. Here READY means the service really serves, a fatal start-up error exits
non-zero (1 runtime, 2 configuration), and SIGTERM/SIGINT stop cleanly with 0.
"""

import contextlib
import logging
import os
import select
import signal
import time
from collections.abc import Callable

from pxe_filter.common import systemd
from pxe_filter.common.config import ConfigError

#: Exit statuses shared by every command.
EXIT_OK, EXIT_RUNTIME, EXIT_CONFIG = 0, 1, 2


class ServiceError(Exception):
    """Start-up or running cannot continue; the message says what to fix. A mistake in the
    configuration is a :class:`ConfigError` instead (exit 2)."""

    exit_code = EXIT_RUNTIME


class Lifecycle:
    """Stop and reload requests from signals, and a main loop that can sleep and be woken."""

    def __init__(self) -> None:
        self.stopping = False
        self.reload_requested = False
        self._last_ping = 0.0
        self._interrupt = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def install_signal_handlers(self, reload: bool = False, interrupt: bool = False) -> None:
        """SIGTERM/SIGINT stop (SIGHUP reloads with ``reload``); each wakes :meth:`wait`.

        With ``interrupt`` a stop also raises SystemExit(0) in the main thread, for services
        whose main thread blocks in a server loop of a library.
        """
        self._interrupt = interrupt
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        if reload:
            signal.signal(signal.SIGHUP, self._on_hup)

    def _on_stop(self, _signum, _frame) -> None:
        # Only flags here (and the optional SystemExit): the main loop acts on them.
        self.stopping = True
        if self._interrupt:
            raise SystemExit(EXIT_OK)

    def _on_hup(self, _signum, _frame) -> None:
        self.reload_requested = True

    def wake(self) -> None:
        """Make a pending or the next :meth:`wait` return at once (any thread)."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"w")

    def wait(self, timeout: float | None) -> None:
        """Sleep up to ``timeout`` seconds, less if a signal or :meth:`wake` comes."""
        if self.stopping or self.reload_requested:
            return
        with contextlib.suppress(InterruptedError):
            select.select([self._wake_r], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 64):
                pass

    def ping(self, force: bool = False) -> None:
        """Tell systemd's watchdog we live, at most every half interval (or now: ``force``)."""
        interval = systemd.watchdog_interval()
        now = time.monotonic()
        if interval is not None and (force or now - self._last_ping >= min(interval / 2, 1.0)):
            self._last_ping = now
            systemd.notify("WATCHDOG=1")

    def idle(self) -> None:
        """The main loop of a service whose work runs in other threads: sleep until stopped."""
        while not self.stopping:
            self.wait(systemd.watchdog_interval())
            self.ping(force=True)

    def begin_shutdown(self, status: str = "stopping") -> None:
        """Tell systemd we stop (and why); ignore further stop signals while cleaning up."""
        systemd.notify("STOPPING=1", f"STATUS={status}"[:400])
        # A repeated SIGTERM must not kill the process with the default action, which
        # Python reinstates for its own handlers while the interpreter finalises.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)


def run(log: logging.Logger, lifecycle: Lifecycle, *, load: Callable[[], None],
        start: Callable[[], str | int], serve: Callable[[], None],
        shutdown: Callable[[], None]) -> int:
    """Load the configuration, start, say READY, serve until stopped, shut down; exit status.

    ``start`` returns the READY status text, or an exit status when the run is already over
    (a one-shot mode); a :class:`ConfigError` it raises exits 2, as one from ``load`` does.
    ``shutdown`` always runs once ``load`` succeeded.
    """
    try:
        load()
    except ConfigError as exc:
        log.critical("Configuration error: %s", exc)
        # systemctl status shows the last STATUS=: make it the reason, not a stale one.
        systemd.notify(f"STATUS=configuration error: {exc}"[:400])
        return EXIT_CONFIG
    status = "stopping"
    try:
        outcome = start()
        if isinstance(outcome, int):
            return outcome
        if lifecycle.stopping:
            return EXIT_OK
        systemd.notify("READY=1", f"STATUS={outcome}"[:400])
        log.info("Ready: %s", outcome)
        serve()
        log.info("Stopping on signal")
        return EXIT_OK
    except (ServiceError, ConfigError) as exc:
        log.critical("%s", exc)
        # systemctl status shows the last STATUS=: make it the reason.
        status = f"failed: {exc}"
        return exc.exit_code if isinstance(exc, ServiceError) else EXIT_CONFIG
    finally:
        lifecycle.begin_shutdown(status)
        shutdown()
