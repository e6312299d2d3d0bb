"""pytest fixtures for real DHCP: namespaces, a DHCP client and dnsmasq.

A test module loads them with ``pytest_plugins = ["tests.support.dhcp_fixtures"]`` (plain
imports would trip ruff's F811 on every fixture argument) and marks itself
``pytestmark = pytest.mark.netns``. Without root or the tools the
fixtures skip (and fail under CI, see :func:`tests.support.services.unavailable`).
"""

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support import netns, services
from tests.support.daemon import filter_command, write_config
from tests.support.dhcp_client import DhcpClient


@pytest.fixture(scope="session")
def netns_pair() -> Iterator[netns.NetnsPair]:
    """A server/client namespace pair for the whole session, deleted at the end."""
    reason = netns.missing_prerequisites()
    if reason:
        services.unavailable("real DHCP (network namespaces)", reason)
    netns.sweep_stale()
    try:
        pair = netns.NetnsPair().create()
    except netns.HarnessError as exc:
        services.unavailable("real DHCP (network namespaces)", exc)
    yield pair
    pair.destroy()


@pytest.fixture(scope="session")
def dhcp_client(netns_pair: netns.NetnsPair) -> Iterator[DhcpClient]:
    """A DhcpClient on the first client interface: ``dhcp_client.discover(mac)``."""
    client = DhcpClient(netns_pair.client, netns_pair.client_if)
    yield client
    client.close()


@pytest.fixture
def hostsdir(tmp_path: Path) -> Path:
    """An empty hostsdir, readable by dnsmasq."""
    path = tmp_path / "hostsdir"
    path.mkdir()
    return path


@pytest.fixture
def dnsmasq_factory(netns_pair: netns.NetnsPair, tmp_path: Path
                    ) -> Iterator[Callable[..., netns.Dnsmasq]]:
    """Start dnsmasq(es) in the server namespace; all are stopped when the test ends.

    ``dnsmasq_factory(hostsdir, extra_args=(), user="root")`` serves ``hostsdir``;
    ``dnsmasq_factory(conf_file=path)`` runs a caller-rendered configuration. Only one may
    serve the bridge at a time: stop the first before starting another.
    """
    started: list[netns.Dnsmasq] = []

    def start(hostsdir: Path | None = None, *, conf_file: Path | None = None,
              extra_args: tuple[str, ...] = (), user: str = "root") -> netns.Dnsmasq:
        workdir = tmp_path / f"dnsmasq{len(started)}"
        workdir.mkdir()
        if conf_file is not None:
            proc = netns.Dnsmasq.for_conf_file(netns_pair, workdir, conf_file, extra_args)
        elif hostsdir is not None:
            proc = netns.Dnsmasq.for_hostsdir(netns_pair, workdir, hostsdir, extra_args, user)
        else:
            raise TypeError("dnsmasq_factory needs a hostsdir or a conf_file")
        started.append(proc)
        return proc.start()

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def db(sqlite_url):
    """A migrated SQLite database for the filter (its URL)."""
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    return sqlite_url


def dnsmasq_sections(tmp_path: Path, pair: netns.NetnsPair, hostsdir: Path, mode: str,
                     log_dhcp: bool = True, **pxe_filter: object) -> dict:
    """Configuration sections; renders dnsmasq.conf with the real command."""
    conf_file = tmp_path / "dnsmasq.conf"
    binary = "dnsmasq --keep-in-foreground" if mode == "commands" else "dnsmasq"
    sections = {
        "pxe_filter": {"dhcp_hostsdir": str(hostsdir), **pxe_filter},
        "dnsmasq": {
            "interface": netns.BRIDGE, "no_ping": True, "log_facility": "-", "user": "root",
            "dhcp_ranges": f"{netns.RANGE_START},{netns.RANGE_END},{netns.NETMASK}",
            "leasefile": str(tmp_path / "leases"), "pid_file": str(tmp_path / "dnsmasq.pid"),
            "config_file": str(conf_file), "control": mode, "log_dhcp": log_dhcp,
            "lease_report_dir": str(tmp_path / "lease-reports"),
            "start_command": f"ip netns exec {pair.server} {binary} --conf-file={conf_file}"},
    }
    config = write_config(tmp_path / "render.conf", sections)
    proc = subprocess.run([*filter_command(), "render-dnsmasq-config", "--config-file",
                           str(config)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr  # includes dnsmasq --test
    assert conf_file.exists()
    return sections


@pytest.fixture
def kill_pidfile_dnsmasq(tmp_path):
    """pidfile mode leaves dnsmasq running when the daemon stops: stop it after the test."""
    yield
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((tmp_path / "dnsmasq.pid").read_text()), signal.SIGTERM)
