"""A hung database (it accepts and acknowledges, but never answers) closes unknown MACs within
the outage limit, while denies still close at once and allows wait for it to answer."""

import signal
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from inspection.db import migration
from pxe_filter import broadcast
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from tests.support.daemon import start_filter
from tests.support.filter_nodes import add_node, set_state
from tests.support.tcpproxy import TcpProxy

SERVED, WAITING = "52:54:00:ee:00:01", "52:54:00:ee:00:02"
OUTAGE_LIMIT = 6


def read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def until(predicate, timeout: float) -> float:
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture
def proxied(pg_url):
    engine = create_engine(pg_url)
    migration.upgrade(engine)
    engine.dispose()
    url = make_url(pg_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        yield pg_url, url.set(host="127.0.0.1", port=proxy.port).render_as_string(
            hide_password=False), proxy


def test_a_hung_database_closes_unknown_macs_and_denies_still_apply(tmp_path, proxied,
                                                                   rabbit_url):
    direct, through_proxy, proxy = proxied
    served = add_node(direct, "inspect wait", [SERVED])
    waiting = add_node(direct, "manageable", [WAITING])
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, through_proxy, hostsdir, transport_url=rabbit_url,
                          extra_conf={"pxe_filter": {
                              "sync_period": 2, "database_read_timeout": 2,
                              "database_outage_deny_unknown": OUTAGE_LIMIT}})
    transport = messaging.get_transport(rabbit_url)
    wildcard = hostsdir / "unknown_hosts_filter"
    try:
        daemon.wait_ready(30)
        assert read(wildcard) == "*:*:*:*:*:*\n"  # a node is on inspection
        proxy.freeze()
        frozen = time.monotonic()
        # Unknown MACs are closed on the outage clock, though every read hangs.
        until(lambda: read(wildcard) == "*:*:*:*:*:*,ignore\n", OUTAGE_LIMIT + 10)
        closed_after = time.monotonic() - frozen
        log = daemon.wait_log("MACs of no port are denied until the database answers again")
        # A read on a pooled connection is cut; one needing a new connection times out.
        assert "within 2 s: connection cut" in log or "timeout expired" in log, log
        assert closed_after < OUTAGE_LIMIT + 2 + 3, closed_after  # limit + a read + a tick
        # A deny applies at once; an allow the database cannot confirm waits.
        set_state(direct, served, "manageable")
        set_state(direct, waiting, "inspect wait")
        broadcast.broadcast(transport, allow=[WAITING], deny=[SERVED])
        until(lambda: read(hostsdir / SERVED) == f"{SERVED},ignore\n", 2)
        time.sleep(3)
        assert read(hostsdir / WAITING) == f"{WAITING},ignore\n"
        assert daemon.proc.poll() is None
        proxy.thaw()
        until(lambda: read(hostsdir / WAITING) == f"{WAITING}\n", 15)
        until(lambda: read(wildcard) == "*:*:*:*:*:*\n", 15)  # the database answers again
        daemon.wait_log("The database answers again")
    finally:
        proxy.thaw()
        transport.cleanup()
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0, daemon.log_text()
    print(f"unknown MACs closed {closed_after:.1f} s after the database froze "
          f"(limit {OUTAGE_LIMIT} s)")
