"""update_pxe_filters broadcasts through a real RabbitMQ reaching two real daemons: hints that
the database confirms or contradicts, in any order."""

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
#: manageable nodes whose MACs get an allow and a deny cast back to back
PAIRS = 120


def pair_mac(i: int) -> str:
    return f"52:54:00:00:0a:{i:02x}"


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


def set_state(sqlite_url, state, macs=(M1, M2)):
    """Commit a provision state for the node(s) of ``macs`` (the sender commits, then casts)."""
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        ids = sa.select(Port.node_id).where(Port.address.in_(macs)).scalar_subquery()
        conn.execute(sa.update(Node).where(Node.id.in_(ids)).values(provision_state=state))
    engine.dispose()


@pytest.fixture
def two_daemons(rabbit_url, sqlite_url, tmp_path):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        node = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state="active", inspect_interface="agent",
            conductor_group="")).inserted_primary_key[0]
        conn.execute(sa.insert(Port), [
            {"uuid": str(uuid.uuid4()), "address": mac, "node_id": node} for mac in (M1, M2)])
        for i in range(PAIRS):
            other = conn.execute(sa.insert(Node).values(
                uuid=str(uuid.uuid4()), provision_state="manageable",
                inspect_interface="agent", conductor_group="")).inserted_primary_key[0]
            conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), address=pair_mac(i),
                                                node_id=other))
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


def test_python_broadcast_reaches_both_daemons_within_a_second(two_daemons, transport,
                                                               sqlite_url):
    files = [d.hostsdir / M1 for d in two_daemons]
    assert all(read(f) == DENY.format(M1) for f in files)
    set_state(sqlite_url, "inspect wait")
    broadcast.broadcast(transport, allow=[M1.upper()])
    assert wait_all(files, ALLOW.format(M1), timeout=1.0) < 1.0
    set_state(sqlite_url, "manageable")
    broadcast.broadcast(transport, deny=[M1])
    assert wait_all(files, DENY.format(M1), timeout=1.0) < 1.0
    for daemon in two_daemons:
        daemon.wait_log("Database read for")


def test_an_allow_the_database_contradicts_opens_nothing(two_daemons, transport):
    # M1's node is active; M3 has no port and nothing is on inspection (unknown MACs denied)
    marks = [len(daemon.log_text()) for daemon in two_daemons]
    broadcast.broadcast(transport, allow=[M1, M3])
    for daemon, mark in zip(two_daemons, marks, strict=True):
        # the read that took this hint (the poll's own hints may join it)
        hinted = f"look up ['{M1}', '{M3}']"
        log = daemon.wait_log(hinted, start=mark)
        daemon.wait_log("Database read for", start=log.index(hinted, mark))
        assert read(daemon.hostsdir / M1) == DENY.format(M1)
        assert read(daemon.hostsdir / M3) is None  # left to the deny wildcard
        assert read(daemon.hostsdir / "unknown_hosts_filter").endswith(",ignore\n")


def test_allow_and_deny_cast_back_to_back_end_denied(two_daemons, transport, sqlite_url):
    """The measured race: an allow and a deny 1 ms apart per manageable node, applied by
    oslo.messaging's pool in any order. The database says manageable: all end denied."""
    macs = [pair_mac(i) for i in range(PAIRS)]
    set_state(sqlite_url, "inspect wait")  # M1's node: the positive control, cast last
    for mac in macs:
        broadcast.broadcast(transport, allow=[mac])
        broadcast.broadcast(transport, deny=[mac])
    broadcast.broadcast(transport, allow=[M1])
    # The control opening shows the storm was taken and read (the files of the pairs were
    # denied before it, so only the control can tell a dropped hint from a refused one).
    wait_all([d.hostsdir / M1 for d in two_daemons], ALLOW.format(M1), timeout=10)
    files = [d.hostsdir / mac for d in two_daemons for mac in macs]
    time.sleep(1.0)  # any hint still in oslo.messaging's pool is read too
    opened = [str(f) for f in files if read(f) != DENY.format(f.name)]
    assert opened == []


def test_cli_notify_reaches_both_daemons_within_a_second(two_daemons, rabbit_url,
                                                         sqlite_url):
    files = [d.hostsdir / M2 for d in two_daemons]
    set_state(sqlite_url, "inspect wait")
    cli = Path(sys.executable).with_name("ironic-inspection")
    proc = subprocess.run([str(cli), "filters", "notify", "--transport-url", rabbit_url,
                           "--allow", M2.replace(":", "-")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert wait_all(files, ALLOW.format(M2), timeout=1.0) < 1.0
    set_state(sqlite_url, "manageable")
    proc = subprocess.run([str(cli), "filters", "notify", "--transport-url", rabbit_url,
                           "--deny", M2], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert wait_all(files, DENY.format(M2), timeout=1.0) < 1.0


def test_invalid_broadcast_entries_are_rejected_valid_ones_applied(two_daemons, transport,
                                                                   tmp_path, sqlite_url):
    set_state(sqlite_url, "inspect wait")
    om = messaging.oslo_messaging_module()
    client = om.get_rpc_client(transport, broadcast.target(fanout=True))
    invalid = ["52:54:00:00:00", "52:54:00:00:00:00:00", "52-54-00-00-00-0g",
               "../x", "../../etc/passwd", f"{M3}\n", "52:54:00\n:00:00:03", "",
               "52:54:00:00:00:1", 42, None, {"mac": M3}, [M3]]
    client.cast({}, broadcast.METHOD, allow=[*invalid, M1], deny=M2, surprise="extra")
    wait_all([d.hostsdir / M1 for d in two_daemons], ALLOW.format(M1), timeout=1.0)
    # Methods other than update_pxe_filters are not callable.
    client.cast({}, "full_sync")
    client.cast({}, "hint", deny=[M2])
    time.sleep(0.3)
    for daemon in two_daemons:
        assert daemon.proc.poll() is None
        log = daemon.wait_log("1 allow(s) to confirm with the database, 14 rejected")
        assert "ignoring unknown argument(s) surprise" in log
        assert log.count("Broadcast: rejected 14 invalid entr(y/ies), e.g.") == 1, log
        names = {p.name for p in daemon.hostsdir.iterdir() if not p.name.startswith(".")}
        assert {M1, M2, "unknown_hosts_filter"} <= names and not names & {"x", "passwd"}
        # M2 was named by no valid entry (the deny was a string, rejected): the database's
        # verdict reaches it by the change poll, never a deny from that string
        wait_all([daemon.hostsdir / M2], ALLOW.format(M2), timeout=5.0)
    assert not (tmp_path / "x").exists()
    # Still serving broadcasts afterwards.
    set_state(sqlite_url, "manageable")
    broadcast.broadcast(transport, deny=[M1])
    wait_all([d.hostsdir / M1 for d in two_daemons], DENY.format(M1), timeout=1.0)
