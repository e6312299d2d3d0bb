"""update_pxe_filters broadcasts through a real RabbitMQ reaching two real daemons."""

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter import broadcast
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from tests.support.daemon import start_filter

M1, M2, M3 = "52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:03"
ALLOW, DENY = "{}\n", "{},ignore\n"


def read(path: Path):
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def wait_all(paths, expected, timeout):
    """Seconds until every path holds ``expected``; fails after ``timeout``."""
    start = time.monotonic()
    while any(read(p) != expected for p in paths):
        elapsed = time.monotonic() - start
        assert elapsed < timeout, {str(p): read(p) for p in paths}
        time.sleep(0.005)
    return time.monotonic() - start


@pytest.fixture
def two_daemons(rabbit_url, sqlite_url, tmp_path):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        node = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state="active",
            conductor_group="")).inserted_primary_key[0]
        conn.execute(sa.insert(Port), [
            {"uuid": str(uuid.uuid4()), "address": mac, "node_id": node} for mac in (M1, M2)])
    engine.dispose()
    daemons = []
    try:
        for name in ("filter-a", "filter-b"):
            hostsdir = tmp_path / f"{name}-hosts"
            hostsdir.mkdir()
            daemons.append(start_filter(tmp_path, sqlite_url, hostsdir,
                                        transport_url=rabbit_url, name=name))
        for daemon in daemons:
            daemon.wait_ready(30)
            assert "Listening for update_pxe_filters" in daemon.log_text()
        yield daemons
    finally:
        for daemon in daemons:  # stop them in parallel
            daemon.signal(signal.SIGTERM)
        codes = [daemon.stop() for daemon in daemons]
    assert codes == [0, 0], [d.log_text() for d in daemons]


@pytest.fixture
def transport(rabbit_url):
    transport = messaging.get_transport(rabbit_url)
    yield transport
    transport.cleanup()


def test_python_broadcast_reaches_both_daemons_within_a_second(two_daemons, transport):
    files = [d.hostsdir / M1 for d in two_daemons]
    assert all(read(f) == DENY.format(M1) for f in files)
    broadcast.broadcast(transport, allow=[M1.upper()])
    assert wait_all(files, ALLOW.format(M1), timeout=1.0) < 1.0
    broadcast.broadcast(transport, deny=[M1])
    assert wait_all(files, DENY.format(M1), timeout=1.0) < 1.0
    # A MAC without a port can be opened too (a machine about to be discovered).
    broadcast.broadcast(transport, allow=[M3], deny=[M2])
    wait_all([d.hostsdir / M3 for d in two_daemons], ALLOW.format(M3), timeout=1.0)
    for daemon in two_daemons:
        daemon.wait_log("Broadcast applied: 1 allowed, 1 denied, 0 rejected")


def test_cli_notify_reaches_both_daemons_within_a_second(two_daemons, rabbit_url):
    files = [d.hostsdir / M2 for d in two_daemons]
    cli = Path(sys.executable).with_name("ironic-inspection")
    proc = subprocess.run([str(cli), "filters", "notify", "--transport-url", rabbit_url,
                           "--allow", M2.replace(":", "-")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert wait_all(files, ALLOW.format(M2), timeout=1.0) < 1.0
    proc = subprocess.run([str(cli), "filters", "notify", "--transport-url", rabbit_url,
                           "--deny", M2], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert wait_all(files, DENY.format(M2), timeout=1.0) < 1.0


def test_invalid_broadcast_entries_are_rejected_valid_ones_applied(two_daemons, transport,
                                                                   tmp_path):
    om = messaging.oslo_messaging_module()
    client = om.get_rpc_client(transport, broadcast.target(fanout=True))
    invalid = ["52:54:00:00:00", "52:54:00:00:00:00:00", "52-54-00-00-00-0g",
               "../x", "../../etc/passwd", f"{M3}\n", "52:54:00\n:00:00:03", "",
               "52:54:00:00:00:1", 42, None, {"mac": M3}, [M3]]
    client.cast({}, broadcast.METHOD, allow=[*invalid, M1], deny=M2, surprise="extra")
    wait_all([d.hostsdir / M1 for d in two_daemons], ALLOW.format(M1), timeout=1.0)
    # Methods other than update_pxe_filters are not callable.
    client.cast({}, "full_sync")
    client.cast({}, "apply_broadcast", allow=[M2])
    time.sleep(0.3)
    for daemon in two_daemons:
        assert daemon.proc.poll() is None
        log = daemon.wait_log("Broadcast applied: 1 allowed, 0 denied, 14 rejected")
        assert "ignoring unknown argument(s) surprise" in log
        assert log.count("Broadcast: rejected 14 invalid entr(y/ies), e.g.") == 1, log
        assert sorted(p.name for p in daemon.hostsdir.iterdir()
                      if not p.name.startswith(".")) == sorted([M1, M2, "unknown_hosts_filter"])
        assert read(daemon.hostsdir / M2) == DENY.format(M2)  # untouched by any of it
    assert not (tmp_path / "x").exists()
    # Still serving broadcasts afterwards.
    broadcast.broadcast(transport, deny=[M1])
    wait_all([d.hostsdir / M1 for d in two_daemons], DENY.format(M1), timeout=1.0)
