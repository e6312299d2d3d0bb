"""Self-healing hostsdir, sd_notify sequence and ``ironic-pxe-filter status`` (real daemon)."""

import json
import os
import shutil
import signal
import subprocess
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
from pxe_filter.selfheal import watcher as selfheal
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import FilterSync
from tests.support import files
from tests.support.daemon import filter_command, start_filter

DENIED, ALLOWED, OTHER = "52:54:00:cc:00:01", "52:54:00:cc:00:02", "52:54:00:cc:00:09"
WILDCARD = "unknown_hosts_filter"
STATE = ".ironic-pxe-filter.status.json"


def allow(mac):
    return f"{mac}\n"


def deny(mac):
    return f"{mac},ignore\n"


def time_until(path: Path, expected: str, timeout: float = 2.0) -> float:
    """Seconds until ``path`` holds ``expected`` (polled every 0.5 ms)."""
    return files.time_until(path, expected, timeout)


@pytest.fixture
def filter_db(sqlite_url):
    """A node in 'manageable' (DENIED) and one in 'inspect wait' (ALLOWED): unknown allowed."""
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        for state, mac in (("manageable", DENIED), ("inspect wait", ALLOWED)):
            node = conn.execute(sa.insert(Node).values(
                uuid=str(uuid.uuid4()), provision_state=state, inspect_interface="agent",
                conductor_group="")).inserted_primary_key[0]
            conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), address=mac,
                                                node_id=node))
    engine.dispose()
    return sqlite_url


@pytest.fixture
def hostsdir(tmp_path):
    path = tmp_path / "hostsdir"
    path.mkdir()
    return path


@pytest.fixture
def daemon(tmp_path, filter_db, hostsdir):
    proc = start_filter(tmp_path, filter_db, hostsdir,
                        extra_conf={"pxe_filter": {"sync_period": 3600}})
    proc.wait_ready(20)
    yield proc
    assert proc.stop() == 0, proc.log_text()


def status(config: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*filter_command(), "status", "--config-file", str(config), *extra],
                          capture_output=True, text=True, timeout=30)


def test_foreign_changes_are_put_back_within_100ms(daemon, hostsdir):
    assert files.read(hostsdir / ALLOWED) == allow(ALLOWED)
    assert files.read(hostsdir / DENIED) == deny(DENIED)
    timings = {}

    os.unlink(hostsdir / ALLOWED)  # deleted allow: dnsmasq would not notice until SIGHUP
    timings["deleted"] = time_until(hostsdir / ALLOWED, allow(ALLOWED))
    (hostsdir / DENIED).write_text(allow(DENIED))  # edited in place
    timings["edited"] = time_until(hostsdir / DENIED, deny(DENIED))
    os.truncate(hostsdir / ALLOWED, 0)
    timings["truncated"] = time_until(hostsdir / ALLOWED, allow(ALLOWED))
    os.rename(hostsdir / WILDCARD, hostsdir / ".moved-away")  # a dotfile: dnsmasq ignores it
    timings["renamed"] = time_until(hostsdir / WILDCARD, "*:*:*:*:*:*\n")
    (hostsdir / OTHER).write_text(deny(OTHER))  # unknown MACs are allowed here
    timings["created"] = time_until(hostsdir / OTHER, allow(OTHER))
    print({k: f"{v * 1000:.1f} ms" for k, v in timings.items()})
    assert max(timings.values()) < 0.1, timings

    log = daemon.wait_log(f"{hostsdir / OTHER} was created by someone else")
    # write_text() truncates before it writes: the watcher may see either step first.
    for name, whats in ((ALLOWED, ("deleted",)), (DENIED, ("edited", "truncated")),
                        (ALLOWED, ("truncated",)), (WILDCARD, ("deleted",))):
        assert any(f"WARNING pxe_filter.sync: {hostsdir / name} was {what} by someone else"
                   in log for what in whats), log
    assert (hostsdir / ".moved-away").exists()  # dotfiles are left alone
    deadline = time.monotonic() + 2
    while json.loads((hostsdir / STATE).read_text())["repaired"] < 5:
        assert time.monotonic() < deadline, (hostsdir / STATE).read_text()
        time.sleep(0.02)


def test_own_writes_are_not_taken_for_foreign_ones(tmp_path, filter_db, hostsdir,
                                                   rabbit_url):
    proc = start_filter(tmp_path, filter_db, hostsdir, transport_url=rabbit_url,
                        extra_conf={"pxe_filter": {"sync_period": 3600}})
    proc.wait_ready(30)
    transport = messaging.get_transport(rabbit_url)
    try:
        macs = [f"52:54:01:00:{i // 256:02x}:{i % 256:02x}" for i in range(3000)]
        broadcast.broadcast(transport, deny=macs)
        proc.wait_log("Broadcast: 3000 MAC(s) denied at once (3000 file(s) written")
        # No port has them and a node is on inspection: the unknown-MAC policy reopens them
        proc.wait_log("left to the wildcard; 3000 file(s) written")
        start = len(proc.log_text())
        broadcast.broadcast(transport, allow=macs[:10])
        proc.wait_log("Database read for", start=start)
        time.sleep(0.3)
        assert all(files.read(hostsdir / mac) == allow(mac) for mac in macs)
        assert "by someone else" not in proc.log_text()

        result = status(proc.config_path, "--format", "json")
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["running"] is True and data["pid"] == proc.pid
        assert data["repaired"] == 0
        assert data["broadcasts"] == 2
        assert data["last_broadcast"]["allowed"] == 10
        assert data["last_broadcast"]["written"] == 0  # an allow waits for the database
        assert data["allowed"] == 1 and data["denied"] == 1  # what the database says
        assert data["wildcard"] == "allow"
        assert data["last_sync"]["first"] is True and data["last_sync"]["duration_s"] >= 0
        assert data["dnsmasq"]["control"] == "none"
        assert data["errors"]["count"] == 0

        human = status(proc.config_path)
        assert human.returncode == 0
        assert f"ironic-pxe-filter: running (pid {proc.pid})" in human.stdout
        assert "allowed MACs:        1" in human.stdout
        assert "unknown MACs:        allow (wildcard)" in human.stdout
        assert "10 allowed, 0 denied, 0 rejected, 0 written" in human.stdout
    finally:
        transport.cleanup()
        assert proc.stop() == 0, proc.log_text()
    stopped = status(proc.config_path)
    assert stopped.returncode == 3
    assert "not running: stopped at" in stopped.stdout


def test_status_says_when_the_daemon_is_not_running(tmp_path, filter_db, hostsdir):
    proc = start_filter(tmp_path, filter_db, hostsdir)
    config = proc.config_path
    proc.wait_ready(20)
    proc.proc.kill()  # no clean shutdown: the state file still says running
    proc.stop()
    result = status(config, "--format", "json")
    assert result.returncode == 3
    data = json.loads(result.stdout)
    assert data["running"] is False
    assert f"pid {proc.pid} in the state file is gone" in data["message"]
    (hostsdir / STATE).unlink()
    result = status(config)
    assert result.returncode == 3
    assert "not running, or has not finished its first sync: no state file" in result.stdout


def test_sd_notify_sequence(tmp_path, filter_db, hostsdir):
    proc = start_filter(tmp_path, filter_db, hostsdir,
                        extra_conf={"pxe_filter": {"sync_period": 0}},
                        env={"WATCHDOG_USEC": "400000"})
    proc.wait_ready(20)
    proc.collect(0.7)  # sync_period 0: pings must still come, every 0.2 s
    proc.signal(signal.SIGHUP)
    proc.collect(0.7)
    proc.signal(signal.SIGTERM)
    proc.collect(0.7)
    assert proc.wait(10) == 0, proc.log_text()
    proc.collect(0.1)
    proc.notify.close()
    fields = [f for f in proc.notifications if not f.startswith("MONOTONIC_USEC=")]
    ready = fields.index("READY=1")
    assert any(f.startswith("STATUS=") and "allowed" in f for f in fields[:ready])
    reloading = fields.index("RELOADING=1")
    watchdogs = [i for i, f in enumerate(fields) if f == "WATCHDOG=1"]
    assert len([i for i in watchdogs if ready < i < reloading]) >= 2, fields
    stamps = [f for f in proc.notifications if f.startswith("MONOTONIC_USEC=")]
    assert len(stamps) == 1 and int(stamps[0].split("=")[1]) > 0
    ready_again = fields.index("READY=1", reloading)
    stopping = fields.index("STOPPING=1")
    assert ready < reloading < ready_again < stopping, fields
    assert fields[stopping:].count("WATCHDOG=1") == 0


def test_replaced_hostsdir_without_control_exits_1(tmp_path, filter_db, hostsdir):
    proc = start_filter(tmp_path, filter_db, hostsdir)
    proc.wait_ready(20)
    os.rename(hostsdir, tmp_path / "old-hostsdir")  # as 'mv' or a careless rm -r would
    shutil.rmtree(tmp_path / "old-hostsdir")
    assert proc.wait(10) == 1, proc.log_text()
    log = proc.log_text()
    assert f"CRITICAL pxe_filter.daemon: The hostsdir {hostsdir} was removed or replaced" \
        in log
    assert "no [dnsmasq]control is configured, so exiting" in log
    # Restored before exiting, so a restart finds it (dnsmasq must be restarted too).
    assert files.read(hostsdir / ALLOWED) == allow(ALLOWED)
    assert files.read(hostsdir / DENIED) == deny(DENIED)
    assert files.read(hostsdir / WILDCARD) == "*:*:*:*:*:*\n"
    proc.stop()


@pytest.mark.parametrize("drain_every", [selfheal.DRAIN_EVERY, 10**9])
def test_own_bulk_writes_drain_the_queue_and_a_foreign_edit_among_them_is_repaired(
        tmp_path, filter_db, drain_every, monkeypatch, caplog):
    """The daemon's watcher wiring, in process: 6000 writes make 30,000 events, twice the
    kernel queue. Drained as they are written (the default), nothing overflows and only
    the foreign edit is repaired; never drained, the queue overflows."""
    monkeypatch.setattr(selfheal, "DRAIN_EVERY", drain_every)
    engine = create_engine(filter_db)
    macs = [f"52:54:00:ee:{i >> 8:02x}:{i & 255:02x}" for i in range(6000)]
    with engine.begin() as conn:
        node = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state="manageable", inspect_interface="agent",
            conductor_group="")).inserted_primary_key[0]
        conn.execute(sa.insert(Port), [{"uuid": str(uuid.uuid4()), "address": mac,
                                        "node_id": node} for mac in macs])
    hostsdir = tmp_path / "bulk"
    hostsdir.mkdir()
    victim, calls, overflows, repaired = [], [], [], []

    def should_stop():
        calls.append(1)
        if len(calls) == 3000:  # someone edits a file we wrote, in place, mid-burst
            victim.append(next(n for n in os.listdir(hostsdir) if n.startswith("52:")))
            with open(hostsdir / victim[0], "r+") as handle:
                handle.write(allow(victim[0]))
        return False

    sync = FilterSync(DatabaseSource(engine), str(hostsdir), should_stop=should_stop)

    def repair(names, content):
        done = sync.repair(names, content)
        repaired.extend(done)
        return done

    watcher = selfheal.HostsdirWatcher(str(hostsdir), repair, lambda: overflows.append(1),
                                       lambda reason: None)
    sync.hostsdir.observer = watcher
    try:
        assert sync.full_sync().written == 6003
        watcher.start()
        if drain_every > len(macs):
            deadline = time.monotonic() + 5
            while not overflows:
                assert time.monotonic() < deadline, "the queue did not overflow"
                time.sleep(0.01)
            return
        time_until(hostsdir / victim[0], deny(victim[0]))
        time.sleep(0.2)  # anything else the watcher would (wrongly) repair
        assert watcher.drains >= 5 and overflows == []
        assert repaired == victim
        assert f"{hostsdir / victim[0]} was edited by someone else" in caplog.text
    finally:
        watcher.stop()
        engine.dispose()
