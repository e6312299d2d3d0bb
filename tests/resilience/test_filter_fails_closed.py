"""The filter fails closed: when a file cannot be written, dnsmasq never serves a MAC that the
database denies (issue 11, finding 2). A real dnsmasq in a network namespace is the oracle.

Before the fix, each scenario left VICTIM (moved off inspection while writes failed) and
NEWPORT (a port created meanwhile) served for as long as the fault lasted.
"""

import ctypes
import errno
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.resilience import filter_rig as rig
from tests.support import files, services
from tests.support.daemon import start_filter
from tests.support.filter_nodes import add_node, set_state

pytestmark = pytest.mark.netns
pytest_plugins = ["tests.support.dhcp_fixtures"]

WAITING = "52:54:00:ee:00:01"  # node in 'inspect wait' throughout: served while dnsmasq runs
VICTIM = "52:54:00:ee:00:02"   # node moved from 'inspect wait' to 'manageable' during the fault
NEWPORT = "52:54:00:ee:00:03"  # port of a 'manageable' node created during the fault
UNKNOWN = "52:54:00:ee:00:04"  # no port: the wildcard decides (allowed: a node is inspecting)
WINDOW = 3.0  # seconds of probing while the fault lasts
SETTLE = 2.5  # two syncs (one a second) after the database change


def deny(mac: str) -> str:
    return f"{mac},ignore\n"


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs (to fill up, or remount read-only), unmounted at the end."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs",
                           str(mnt)], capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        services.unavailable("a tmpfs mount", proc.stderr.strip())
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=10)


def fill(mnt: Path) -> None:
    """Write a file until the file system is full (ENOSPC)."""
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            chunk = b"\0" * size
            try:
                while os.write(fd, chunk):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)


def remount(mnt: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mnt)], check=True, timeout=10)


def chattr(flag: str, path: Path) -> None:
    if shutil.which("chattr") is None:
        services.unavailable("chattr", "not installed (Debian: e2fsprogs)")
    proc = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        services.unavailable("chattr", proc.stderr.strip())


def exchange(a: Path, b: Path) -> None:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
        services.unavailable("renameat2", os.strerror(ctypes.get_errno()))


@pytest.fixture
def db(sqlite_url):
    """WAITING's node and VICTIM's node on inspection: both served, unknown MACs too."""
    rig.migrate(sqlite_url)
    add_node(sqlite_url, "inspect wait", [WAITING])
    return sqlite_url


def served_while_faulty(db, victim, dhcp_client) -> dict[str, float]:
    """Close VICTIM and create NEWPORT in the database; seconds each MAC was served."""
    set_state(db, victim, "manageable")
    add_node(db, "manageable", [NEWPORT])
    time.sleep(SETTLE)
    served = rig.served_during(dhcp_client, [VICTIM, NEWPORT, UNKNOWN, WAITING], WINDOW)
    print(f"served during {WINDOW} s of fault: {served}")
    return served


def start_with_victim(tmp_path, db, hostsdir, netns_pair, dhcp_client):
    """VICTIM's node on inspection, the daemon and its dnsmasq: (daemon, VICTIM's node)."""
    victim = add_node(db, "inspect wait", [VICTIM])
    daemon = rig.start(tmp_path, db, hostsdir, netns_pair)
    dhcp_client.await_offer(WAITING, offered=True, within=5)
    assert dhcp_client.discover(VICTIM) is not None
    return daemon, victim


def test_disk_full_never_serves_a_denied_mac(tmp_path, db, small_fs, netns_pair,
                                             dhcp_client):
    hostsdir = small_fs / "hostsdir"
    hostsdir.mkdir()
    daemon, victim = start_with_victim(tmp_path, db, hostsdir, netns_pair, dhcp_client)
    try:
        fill(small_fs)
        served = served_while_faulty(db, victim, dhcp_client)
        assert served[WAITING] > 0, "dnsmasq must keep serving what is allowed"
        # VICTIM: its deny line written in place; NEWPORT: no file can be created, so the
        # reserved deny wildcard was renamed over the wildcard (unknown MACs denied too).
        assert served[VICTIM] == served[NEWPORT] == served[UNKNOWN] == 0, served
        assert files.read(hostsdir / VICTIM) == deny(VICTIM)
        log = daemon.log_text()
        assert f"Cannot write {hostsdir / NEWPORT} (deny): No space left on device. " \
               f"Failing closed" in log
        state = rig.status_json(daemon)  # overwritten in place on the full disk
        assert state["fail_closed"] is True and NEWPORT in state["fail_closed_reason"]
        code, text = rig.status(daemon, "human")
        assert code == 0 and "fail closed:         YES: unknown MACs denied" in text
        (small_fs / "filler").unlink()
        took = rig.wait_until(lambda: files.read(hostsdir / NEWPORT) == deny(NEWPORT), 5,
                              "NEWPORT's deny file written once space is back")
        dhcp_client.await_offer(UNKNOWN, offered=True, within=5)
        assert dhcp_client.discover(NEWPORT, control=WAITING) is None
        assert dhcp_client.discover(VICTIM, control=WAITING) is None
        assert rig.status_json(daemon)["fail_closed"] is False
        assert "No longer failing closed" in daemon.log_text()
        print(f"recovered {took:.2f} s after space came back")
        assert daemon.stop() == 0, daemon.log_text()
    finally:
        daemon.stop()


@pytest.mark.parametrize("fault", ["read-only", "immutable"])
def test_unwritable_file_stops_dnsmasq_until_it_can_be_written(  # noqa: PLR0917 - fixtures
        tmp_path, db, small_fs, netns_pair, dhcp_client, fault):
    hostsdir = (small_fs if fault == "read-only" else tmp_path) / "hostsdir"
    hostsdir.mkdir()
    daemon, victim = start_with_victim(tmp_path, db, hostsdir, netns_pair, dhcp_client)
    try:
        if fault == "read-only":
            remount(small_fs, "ro")
        else:
            chattr("+i", hostsdir / VICTIM)  # its allow line beats any wildcard
        served = served_while_faulty(db, victim, dhcp_client)
        # Nothing on disk can deny VICTIM: dnsmasq is stopped, nobody is served.
        assert served == dict.fromkeys(served, 0), served
        daemon.wait_log("dnsmasq STOPPED, no MAC is served")
        if fault == "immutable":
            state = rig.status_json(daemon)
            assert state["fail_closed"] is True
            assert state["fail_closed_reason"].startswith(f"dnsmasq stopped: cannot deny "
                                                          f"{VICTIM}")
            remount_or_unlock = lambda: chattr("-i", hostsdir / VICTIM)  # noqa: E731
        else:
            remount_or_unlock = lambda: remount(small_fs, "rw")  # noqa: E731
        remount_or_unlock()
        took = dhcp_client.await_offer(WAITING, offered=True, within=8)
        daemon.wait_log("Every denial is on disk again")
        assert dhcp_client.discover(VICTIM, control=WAITING) is None
        assert dhcp_client.discover(NEWPORT, control=WAITING) is None
        assert dhcp_client.discover(UNKNOWN) is not None
        print(f"dnsmasq serving again {took:.2f} s after the fault ended")
        assert daemon.stop() == 0, daemon.log_text()
    finally:
        if fault == "immutable" and (hostsdir / VICTIM).exists():
            subprocess.run(["chattr", "-i", str(hostsdir / VICTIM)], capture_output=True)
        daemon.stop()


def test_squatting_directories_are_denied_through_the_wildcard(tmp_path, db, netns_pair,
                                                               dhcp_client):
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    daemon, victim = start_with_victim(tmp_path, db, hostsdir, netns_pair, dhcp_client)
    try:
        # VICTIM's allow file swapped for a directory, then deleted: dnsmasq keeps serving
        # it from memory until a reload. NEWPORT's name is taken before its port exists.
        (tmp_path / "squat").mkdir()
        exchange(tmp_path / "squat", hostsdir / VICTIM)
        (tmp_path / "squat").unlink()
        (hostsdir / NEWPORT).mkdir()
        served = served_while_faulty(db, victim, dhcp_client)
        assert served[WAITING] > 0
        assert served[VICTIM] == served[NEWPORT] == served[UNKNOWN] == 0, served
        assert "dnsmasq reloaded after the file of" in daemon.log_text()
        assert rig.status_json(daemon)["fail_closed"] is True
        (hostsdir / VICTIM).rmdir()
        (hostsdir / NEWPORT).rmdir()
        dhcp_client.await_offer(UNKNOWN, offered=True, within=5)
        assert files.read(hostsdir / VICTIM) == deny(VICTIM)
        assert dhcp_client.discover(VICTIM, control=WAITING) is None
        assert dhcp_client.discover(NEWPORT, control=WAITING) is None
        assert rig.status_json(daemon)["fail_closed"] is False
        assert daemon.stop() == 0, daemon.log_text()
    finally:
        daemon.stop()


def test_without_control_an_unenforceable_denial_exits_1(tmp_path, db):
    """No [dnsmasq]control to stop dnsmasq: the daemon exits 1 (systemd's BindsTo= then
    stops dnsmasq) and the state file says why."""
    victim = add_node(db, "inspect wait", [VICTIM])
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf={"pxe_filter": {"sync_period": 1}})
    try:
        daemon.wait_ready(30)
        chattr("+i", hostsdir / VICTIM)
        set_state(db, victim, "manageable")
        assert daemon.wait(10) == 1, daemon.log_text()
        log = daemon.log_text()
        assert f"CRITICAL pxe_filter: cannot deny {VICTIM} (Operation not permitted)" in log
        assert "exiting so that systemd stops dnsmasq with this service (BindsTo=)" in log
        state = rig.status_json(daemon)
        assert state["running"] is False and state["fail_closed"] is True
        assert state["fail_closed_reason"].startswith("exiting: cannot deny")
    finally:
        subprocess.run(["chattr", "-i", str(hostsdir / VICTIM)], capture_output=True)
        daemon.stop()
