"""Run ``ironic-inspection-api`` and ``ironic-inspection-worker`` as real subprocesses.

Each gets a generated configuration, its own log file and (for READY) an abstract
$NOTIFY_SOCKET, the way systemd runs them (see tests.support.processes). Usage::

    worker = start_worker(tmp_path, db_url, rabbit_url, name="w1")
    worker.wait_ready()
    api = start_api(tmp_path, db_url, rabbit_url)
    api.wait_http()
    ...
    assert worker.stop() == 0
"""

import socket
from pathlib import Path

from tests.support.processes import ServiceProcess, console_script, service_sections, spawn

__all__ = ["API_HEADERS", "ServiceProcess", "console_script", "free_port", "start_api",
           "start_worker"]

#: The version header our clients send (``ironic-inspection``): without it the API serves
#: Ironic's 1.1 (no node names, no inspection fields, no rules), as Ironic does.
API_VERSION = "1.96"
API_HEADERS = {"X-OpenStack-Ironic-API-Version": API_VERSION}


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_worker(tmp_path: Path, db_url: str, transport_url: str | None,
                 extra_conf: dict | None = None, *, name: str = "worker",
                 debug: bool = False) -> ServiceProcess:
    """Start ``ironic-inspection-worker`` (host ``name``-<random>) without waiting."""
    sections = service_sections(db_url, transport_url, name, extra_conf)
    argv = console_script("ironic-inspection-worker", "inspection.worker.cmd")
    return spawn(argv, name, Path(tmp_path), sections, debug=debug)


#: ``[api]`` options for tests whose simulated machines all post from 127.0.0.1: one
#: address's rate limit and connection limit must hold a whole rack of them.
ONE_ADDRESS_RACK = {"callback_burst": 1000, "connections_per_client": 0}


def start_api(tmp_path: Path, db_url: str, transport_url: str | None = None,
              extra_conf: dict | None = None, *, name: str = "api",
              port: int | None = None) -> ServiceProcess:
    """Start ``ironic-inspection-api`` on 127.0.0.1 (noauth unless ``extra_conf`` says
    otherwise) without waiting; its base URL is ``.url``."""
    port = port or free_port()
    api = {"api": {"host_ip": "127.0.0.1", "port": port, "auth_strategy": "noauth"}}
    sections = service_sections(db_url, transport_url, name, api, extra_conf)
    argv = console_script("ironic-inspection-api", "inspection.api.cmd")
    return spawn(argv, name, Path(tmp_path), sections, url=f"http://127.0.0.1:{port}")
