"""The service lifecycle shared by the filter, the API and the worker: exit statuses."""

import logging
import os
import signal
import socket

import pytest

from pxe_filter.common import lifecycle
from pxe_filter.common.config import ConfigError

LOG = logging.getLogger("test")


def run(**steps):
    calls = []
    life = lifecycle.Lifecycle()
    defaults = {"load": lambda: calls.append("load"), "start": lambda: "ready",
                "serve": lambda: calls.append("serve"),
                "shutdown": lambda: calls.append("shutdown")}
    code = lifecycle.run(LOG, life, **{**defaults, **steps})
    return code, calls


def test_configuration_error_exits_2_without_starting():
    def load():
        raise ConfigError("bad file")
    assert run(load=load) == (2, [])


@pytest.mark.parametrize(("error", "code"), [
    (lifecycle.ServiceError("database down"), 1),
    (ConfigError("SQLite database x does not exist"), 2),
])
def test_start_failure_exits_with_its_code_and_shuts_down(error, code):
    def start():
        raise error
    assert run(start=start) == (code, ["load", "shutdown"])


def test_one_shot_start_returns_its_status_without_serving():
    assert run(start=lambda: 1) == (1, ["load", "shutdown"])


def test_serves_then_shuts_down_with_0():
    assert run() == (0, ["load", "serve", "shutdown"])


def test_sigterm_wakes_the_idle_loop():
    life = lifecycle.Lifecycle()
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        life.install_signal_handlers()
        signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGTERM))
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        life.idle()  # returns only once the signal arrived
        assert life.stopping
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.set_wakeup_fd(-1)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@pytest.fixture
def notify_socket(tmp_path, monkeypatch):
    """A datagram socket standing in for systemd's $NOTIFY_SOCKET; its received messages."""
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))

    def received() -> list[str]:
        messages = []
        while True:
            try:
                messages.append(sock.recv(4096).decode())
            except BlockingIOError:
                return messages
    yield received
    sock.close()


def test_systemd_status_says_why_the_service_stopped(notify_socket):
    def start():
        raise ConfigError("invalid configuration: sync_period too small")
    run(start=start)
    assert notify_socket()[-1] == ("STOPPING=1\nSTATUS=failed: invalid configuration: "
                                   "sync_period too small")


def test_systemd_status_names_a_configuration_error(notify_socket):
    def load():
        raise ConfigError("bad file")
    run(load=load)
    assert notify_socket() == ["STATUS=configuration error: bad file"]
