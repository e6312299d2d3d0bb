"""pytest fixtures for real DHCP: namespaces, a DHCP client and dnsmasq.

A test module loads them with ``pytest_plugins = ["tests.support.dhcp_fixtures"]`` (plain
imports would trip ruff's F811 on every fixture argument) and marks itself
``pytestmark = pytest.mark.netns``. Without root or the tools the
fixtures skip (and fail under CI, see :func:`tests.support.services.unavailable`).
"""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import netns, services
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

