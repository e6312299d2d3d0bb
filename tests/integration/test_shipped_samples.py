"""Every shipped sample starts as shipped, on a fresh machine (tests.support.fresh_root).

The files of etc/ are copied to /etc unchanged; no command gets a --config-file, so each reads
its defaults (shared.conf, then its own file) and creates its state directories, as on a
machine where the package was just installed.
"""

import os
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests

from tests.integration.pipeline_support import body
from tests.support import services
from tests.support.fresh_root import FreshRoot
from tests.support.processes import ServiceProcess

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
API = "http://127.0.0.1:6385"  # the sample's [api]host_ip and port
INSTALL = f"""
install -d -m 0755 /etc/ironic-inspection/rules /etc/ironic-pxe-filter
install -m 0644 {REPO}/etc/ironic-inspection/shared.conf \
    {REPO}/etc/ironic-inspection/ironic-inspection.conf /etc/ironic-inspection/
install -m 0644 {REPO}/etc/ironic-inspection/rules/*.yaml /etc/ironic-inspection/rules/
install -m 0644 {REPO}/etc/ironic-pxe-filter/ironic-pxe-filter.conf \
    {REPO}/etc/ironic-pxe-filter/dnsmasq-sample.conf /etc/ironic-pxe-filter/
"""


@pytest.fixture
def fresh(tmp_path):
    root = FreshRoot(tmp_path / "scratch")
    installed = root.run(["sh", "-ec", INSTALL])
    assert installed.returncode == 0, installed.stderr
    yield root
    root.close()


@pytest.fixture
def api_port_free():
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", 6385)) == 0:
            services.unavailable("port 6385", "something listens on 127.0.0.1:6385, the "
                                              "sample's API port")


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "PYTHONUNBUFFERED": "1"}


def _ok(result) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def _start(fresh: FreshRoot, tmp_path: Path, name: str, url: str | None = None
           ) -> ServiceProcess:
    """Start a console script with no arguments in the fresh root; READY seen as systemd."""
    address = f"shipped-{uuid.uuid4().hex}"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind("\0" + address)
    log = tmp_path / f"{name}.log"
    proc = fresh.popen([str(BIN / name)], log=log,
                       env={**_env(), "NOTIFY_SOCKET": "@" + address})
    return ServiceProcess(name, proc, notify, log, log, url=url)


def _wait(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.1)


def test_all_in_one_samples_start_unchanged(fresh, tmp_path, api_port_free):
    assert "Created schema revision" in _ok(fresh.run(["ironic-inspection", "dbsync"],
                                                      env=_env()))
    assert fresh.path("/var/lib/ironic-inspection").stat().st_mode & 0o777 == 0o750
    _ok(fresh.run(["ironic-pxe-filter", "--once"], env=_env()))
    hostsdir = fresh.path("/var/lib/ironic-pxe-filter/hostsdir")
    assert (hostsdir / "unknown_hosts_filter").read_text() == "*:*:*:*:*:*,ignore\n"
    rendered = _ok(fresh.run(
        ["ironic-pxe-filter", "render-dnsmasq-config",
         "--config-file", "/etc/ironic-inspection/shared.conf",
         "--config-file", "/etc/ironic-pxe-filter/ironic-pxe-filter.conf",
         "--config-file", "/etc/ironic-pxe-filter/dnsmasq-sample.conf"], env=_env()))
    assert "/var/lib/ironic-pxe-filter/dnsmasq.conf: written" in rendered
    assert "dhcp-hostsdir=/var/lib/ironic-pxe-filter/hostsdir" in fresh.path(
        "/var/lib/ironic-pxe-filter/dnsmasq.conf").read_text().splitlines()
    # Without a message bus there is nothing for a worker to do: it says so and exits 2.
    worker = fresh.run(["ironic-inspection-worker"], env=_env(), timeout=60)
    assert worker.returncode == 2 and "no worker is needed" in worker.stderr
    api = _start(fresh, tmp_path, "ironic-inspection-api", url=API)
    try:
        api.wait_ready()
        assert requests.get(f"{API}/v1/nodes", timeout=5).json() == {"nodes": []}
    finally:
        assert api.stop() == 0, api.log_text()


def test_bus_and_discovery_set_once_in_the_shared_file(fresh, tmp_path, rabbit_url,
                                                      api_port_free):
    """The operator's one edit: transport_url and auto-discovery in shared.conf. API, worker
    and filter then agree: an unknown machine boots, is enrolled and denied afterwards."""
    shared = fresh.path("/etc/ironic-inspection/shared.conf")
    shared.write_text(shared.read_text()
                      .replace("#transport_url = rabbit://ironic:secret@rabbit.example.com"
                               ":5672/", f"transport_url = {rabbit_url}")
                      .replace("#enabled = false", "enabled = true"))
    _ok(fresh.run(["ironic-inspection", "dbsync"], env=_env()))
    started = [_start(fresh, tmp_path, "ironic-pxe-filter"),
               _start(fresh, tmp_path, "ironic-inspection-worker"),
               _start(fresh, tmp_path, "ironic-inspection-api", url=API)]
    try:
        for service in started:
            service.wait_ready()
        hostsdir = fresh.path("/var/lib/ironic-pxe-filter/hostsdir")
        assert (hostsdir / "unknown_hosts_filter").read_text() == "*:*:*:*:*:*\n"
        data = body("bios-vm-x86_64")
        mac = "52:54:00:6e:1a:01"  # its PXE interface
        resp = requests.post(f"{API}/v1/continue_inspection", json=data, timeout=10)
        assert resp.status_code == 202, resp.text

        def enrolled() -> bool:
            nodes = requests.get(f"{API}/v1/nodes?auto_discovered=true", timeout=5).json()
            return bool(nodes["nodes"])
        _wait(enrolled, "the worker enrolls the machine")
        _wait(lambda: (hostsdir / mac).exists(), "the filter writes the machine's MAC file")
        assert (hostsdir / mac).read_text() == f"{mac},ignore\n"  # known now, not inspecting
    finally:
        codes = [service.stop() for service in reversed(started)]
    assert codes == [0, 0, 0], "\n".join(s.log_text()[-2000:] for s in started)
