"""Starting, reloading and restarting the dnsmasq the filter feeds (``[dnsmasq]control``).

Every control answers :meth:`Control.reload` with "reloaded" or "not running" (a dnsmasq that
does not run holds no stale state: it reads the whole hostsdir when it starts) and raises
:class:`ControlError` when it could not tell dnsmasq. The daemon only calls :meth:`start`
after its first full sync, so dnsmasq never reads an unsynced hostsdir.
"""

import contextlib
import ctypes
import logging
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from oslo_config import cfg

LOG = logging.getLogger(__name__)

RELOADED, NOT_RUNNING = "reloaded", "not running"
_COMMAND_TIMEOUT = 30
_STOP_TIMEOUT = 5.0
_RESTART_DELAY = 1.0
_PR_SET_PDEATHSIG = 1


class ControlError(Exception):
    """dnsmasq could not be started, reloaded or stopped; the message says why."""


def _run(argv: Sequence[str], what: str) -> None:
    # Output goes to a file, not a pipe: a daemonising dnsmasq keeps its copy of the
    # descriptors open, and reading a pipe to EOF would wait for dnsmasq to exit.
    with tempfile.TemporaryFile() as output:
        try:
            proc = subprocess.run(list(argv), check=False, stdout=output,
                                  stderr=subprocess.STDOUT, timeout=_COMMAND_TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ControlError(f"{what}: {shlex.join(argv)}: {exc}") from None
        if proc.returncode != 0:
            output.seek(0)
            text = output.read().decode(errors="replace").strip()[-500:]
            raise ControlError(f"{what}: {shlex.join(argv)} exited {proc.returncode}: {text}")


def _split(opts: cfg.ConfigOpts.GroupAttr, option: str) -> list[str] | None:
    """``[dnsmasq]option`` split like a shell would; None when unset."""
    command = opts[option]
    if not command:
        return None
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ControlError(f"[dnsmasq]{option} {command!r}: {exc}") from None
    if not argv:
        raise ControlError(f"[dnsmasq]{option} is empty")
    return argv


def _die_with_parent() -> None:
    # A dnsmasq child must not outlive a killed filter: it would serve stale files.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Control:
    """No control: the operator (or systemd's BindsTo=) runs dnsmasq."""

    name = "none"
    can_reload = False

    def start(self) -> None:
        """Start dnsmasq, or make a running one re-read everything; raises ControlError."""

    def reload(self) -> str:
        """SIGHUP dnsmasq: RELOADED or NOT_RUNNING; raises ControlError."""
        raise ControlError("no [dnsmasq]control configured")

    def restart(self) -> None:
        """Stop and start dnsmasq (a replaced hostsdir); raises ControlError."""
        self.halt()
        self.start()

    def halt(self) -> None:
        """Stop dnsmasq until :meth:`start` (failing closed); raises ControlError."""
        raise ControlError("no [dnsmasq]control configured")

    def stop(self) -> None:
        """Called when the daemon stops."""

    def describe(self) -> dict[str, object]:
        """The control's state for the status file."""
        return {"control": self.name}


class PidFileControl(Control):
    """dnsmasq daemonises itself and writes ``pid_file``; signals go to that pid."""

    name = "pidfile"
    can_reload = True

    def __init__(self, pid_file: str, start_argv: list[str], reload_argv: list[str] | None,
                 binary: str) -> None:
        self.pid_file = pid_file
        self.start_argv = start_argv
        self.reload_argv = reload_argv
        self.comm = os.path.basename(binary)[:15]

    def pid(self) -> int | None:
        """The pid in the pid file if that process is a running dnsmasq."""
        try:
            with open(self.pid_file) as stream:
                pid = int(stream.read().strip() or 0)
            with open(f"/proc/{pid}/comm") as stream:
                comm = stream.read().strip()
        except (OSError, ValueError):
            return None
        return pid if pid > 0 and comm == self.comm else None

    def start(self) -> None:
        """Start dnsmasq unless it runs; a running one is reloaded instead."""
        if self.reload() == RELOADED:
            return
        _run(self.start_argv, "cannot start dnsmasq")
        deadline = time.monotonic() + _STOP_TIMEOUT
        while self.pid() is None:
            if time.monotonic() > deadline:
                raise ControlError(f"dnsmasq started by {shlex.join(self.start_argv)} wrote "
                                   f"no live pid to {self.pid_file}")
            time.sleep(0.02)
        LOG.info("Started dnsmasq (pid %s)", self.pid())

    def reload(self) -> str:
        """SIGHUP the pid in the pid file (or run reload_command)."""
        pid = self.pid()
        if pid is None:
            return NOT_RUNNING
        if self.reload_argv:
            _run(self.reload_argv, "cannot reload dnsmasq")
            return RELOADED
        try:
            os.kill(pid, signal.SIGHUP)
        except ProcessLookupError:
            return NOT_RUNNING
        except OSError as exc:
            raise ControlError(f"cannot SIGHUP dnsmasq (pid {pid}): {exc.strerror}") from None
        return RELOADED

    def halt(self) -> None:
        """SIGTERM the running dnsmasq and wait for it to go (SIGKILL after 5 s)."""
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + _STOP_TIMEOUT
            while self.pid() == pid and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.pid() == pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)

    def describe(self) -> dict[str, object]:
        """Control name, pid file and the live pid (None: not running)."""
        pid = self.pid()
        return {"control": self.name, "pid_file": self.pid_file, "pid": pid,
                "running": pid is not None}


class SystemdControl(Control):
    """``systemctl --no-block`` on the dnsmasq unit (ordered After= the filter: never block)."""

    name = "systemd"
    can_reload = True

    def __init__(self, unit: str) -> None:
        self.unit = unit

    def start(self) -> None:
        """reload-or-restart: a running unit re-reads the hostsdir, a stopped one starts."""
        _run(["systemctl", "--no-block", "reload-or-restart", self.unit],
             "cannot start dnsmasq")

    def reload(self) -> str:
        """``systemctl --no-block reload`` when the unit is active.

        Never a blocking reload: the dnsmasq unit is ordered After= the filter, so while the
        filter's own reload job runs (``systemctl reload ironic-pxe-filter``), a blocking
        reload of dnsmasq would wait for it, and it for us, until the watchdog killed us.
        """
        try:
            if subprocess.run(["systemctl", "is-active", "--quiet", self.unit], check=False,
                              capture_output=True, timeout=_COMMAND_TIMEOUT).returncode:
                return NOT_RUNNING
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ControlError(f"systemctl is-active {self.unit}: {exc}") from None
        _run(["systemctl", "--no-block", "reload", self.unit], "cannot reload dnsmasq")
        return RELOADED

    def restart(self) -> None:
        """``systemctl --no-block restart``."""
        _run(["systemctl", "--no-block", "restart", self.unit], "cannot restart dnsmasq")

    def halt(self) -> None:
        """``systemctl stop`` (waits: the filter runs, so no start job of ours is queued)."""
        _run(["systemctl", "stop", self.unit], "cannot stop dnsmasq")

    def describe(self) -> dict[str, object]:
        """Control name and unit."""
        return {"control": self.name, "unit": self.unit}


class CommandsControl(Control):
    """dnsmasq as a supervised foreground child: restarted when it exits, stopped with us."""

    name = "commands"
    can_reload = True

    def __init__(self, start_argv: list[str], reload_argv: list[str] | None,
                 stop_argv: list[str] | None, on_exit: Callable[[str], None]) -> None:
        self.start_argv = start_argv
        self.reload_argv = reload_argv
        self.stop_argv = stop_argv
        self.on_exit = on_exit
        self.proc: subprocess.Popen | None = None
        self._lock = threading.RLock()

    def start(self) -> None:
        """Spawn the child and check it survives its first moments."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                self.reload()
                return
            self._spawn()
            proc = self.proc
        assert proc is not None
        try:
            # dnsmasq refuses a bad configuration at once: report it as a start failure.
            code = proc.wait(0.3)
        except subprocess.TimeoutExpired:
            return
        raise ControlError(f"dnsmasq ({shlex.join(self.start_argv)}) exited {code} at start; "
                           f"see its messages above")

    def _spawn(self, supervise: bool = True) -> None:
        # The child gets SIGTERM when the *thread* that forked it ends: spawn only from the
        # main thread or from the supervisor thread, which lives as long as its child.
        try:
            proc = subprocess.Popen(self.start_argv, stdin=subprocess.DEVNULL,
                                    preexec_fn=_die_with_parent)  # noqa: PLW1509
        except OSError as exc:
            raise ControlError(f"cannot start dnsmasq: {shlex.join(self.start_argv)}: "
                               f"{exc.strerror or exc}") from None
        self.proc = proc
        LOG.info("Started dnsmasq (pid %d): %s", proc.pid, shlex.join(self.start_argv))
        if supervise:
            threading.Thread(target=self._supervise, args=(proc,), name="dnsmasq-supervisor",
                             daemon=True).start()

    def _supervise(self, proc: subprocess.Popen) -> None:
        while True:
            code = proc.wait()
            time.sleep(_RESTART_DELAY)  # no busy restart loop on a dnsmasq that cannot start
            with self._lock:
                if self.proc is not proc:
                    return  # halted (halt() forgets the child) or restarted on purpose
                message = f"dnsmasq (pid {proc.pid}) exited with status {code}; restarting it"
                LOG.error("%s", message)
                self.on_exit(message)
                try:
                    self._spawn(supervise=False)
                except ControlError as exc:
                    LOG.error("%s", exc)
                    self.on_exit(str(exc))
                    return
                assert self.proc is not None
                proc = self.proc

    def reload(self) -> str:
        """reload_command, or SIGHUP to the child."""
        with self._lock:
            if self.proc is None or self.proc.poll() is not None:
                return NOT_RUNNING
            if self.reload_argv:
                _run(self.reload_argv, "cannot reload dnsmasq")
            else:
                self.proc.send_signal(signal.SIGHUP)
            return RELOADED

    def halt(self) -> None:
        """Stop the child until :meth:`start`; its supervisor does not restart it."""
        with self._lock:
            proc, self.proc = self.proc, None
            if proc is None or proc.poll() is not None:
                return
            if self.stop_argv:
                with contextlib.suppress(ControlError):
                    _run(self.stop_argv, "cannot stop dnsmasq")
            else:
                proc.terminate()
            try:
                proc.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop(self) -> None:
        """Stop the child for good (the daemon is stopping)."""
        self.halt()

    def describe(self) -> dict[str, object]:
        """Control name, child pid and whether it runs (the status file counts restarts)."""
        proc = self.proc
        running = proc is not None and proc.poll() is None
        return {"control": self.name, "pid": proc.pid if running else None, "running": running}


def from_conf(conf: cfg.ConfigOpts, on_exit: Callable[[str], None]) -> Control:
    """The control ``[dnsmasq]`` asks for; raises ControlError on a bad combination."""
    opts = conf.dnsmasq
    reload_argv = _split(opts, "reload_command")
    if opts.control == "none":
        return Control()
    if opts.control == "systemd":
        if not opts.systemd_unit:
            raise ControlError("[dnsmasq]control = systemd needs [dnsmasq]systemd_unit")
        return SystemdControl(opts.systemd_unit)
    start = _split(opts, "start_command")
    if opts.control == "pidfile":
        if not opts.pid_file:
            raise ControlError("[dnsmasq]control = pidfile needs [dnsmasq]pid_file")
        return PidFileControl(opts.pid_file, start or [opts.binary,
                                                       f"--conf-file={opts.config_file}"],
                              reload_argv, opts.binary)
    if not start:
        raise ControlError("[dnsmasq]control = commands needs [dnsmasq]start_command, e.g. "
                           "'dnsmasq --keep-in-foreground --conf-file=...'")
    return CommandsControl(start, reload_argv, _split(opts, "stop_command"), on_exit)
