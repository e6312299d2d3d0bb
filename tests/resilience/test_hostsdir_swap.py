"""A hostsdir swapped for a symlink is never followed (issue 11, finding 3).

An atomic exchange (renameat2 RENAME_EXCHANGE) puts a symlink at the configured path and moves
the real directory away. Before the fix the daemon took the symlink for a "replaced" hostsdir
and restored every file, its lock and its status file into the symlink's target. Now every
file operation is relative to the directory it holds open: it writes nothing there, stops
dnsmasq (which would read the target at its next reload or start) and exits 1.
"""

import ctypes
import os

import pytest

from tests.resilience import filter_rig as rig
from tests.support import files, services
from tests.support.daemon import start_filter
from tests.support.filter_nodes import add_node

pytest_plugins = ["tests.support.dhcp_fixtures"]

ALLOWED, DENIED = "52:54:00:ef:00:01", "52:54:00:ef:00:02"
PLANTED = "*:*:*:*:*:*\n"  # the attacker's wildcard: serve everyone


def exchange(a, b) -> None:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
        services.unavailable("renameat2", os.strerror(ctypes.get_errno()))


@pytest.fixture
def db(sqlite_url):
    rig.migrate(sqlite_url)
    add_node(sqlite_url, "inspect wait", [ALLOWED])
    add_node(sqlite_url, "manageable", [DENIED])
    return sqlite_url


def swap(tmp_path, hostsdir):
    """The attacker's directory (a planted allow-all wildcard) swapped in by a symlink."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "unknown_hosts_filter").write_text(PLANTED)
    link = tmp_path / "link"
    os.symlink(elsewhere, link)
    exchange(hostsdir, link)  # hostsdir -> elsewhere; the real directory is now at "link"
    return elsewhere, link


def check_refused(daemon, hostsdir, elsewhere, link) -> None:
    assert daemon.wait(10) == 1, daemon.log_text()
    log = daemon.log_text()
    assert f"CRITICAL pxe_filter: the hostsdir {hostsdir} is now a symbolic link" in log
    assert "Put the real directory back" in log
    assert sorted(os.listdir(elsewhere)) == ["unknown_hosts_filter"]
    assert files.read(elsewhere / "unknown_hosts_filter") == PLANTED
    # The status file, written in the directory held, says why.
    state = files.read(link / ".ironic-pxe-filter.status.json")
    assert '"fail_closed": true' in state and "is now a symbolic link" in state


def test_swapped_hostsdir_without_control_is_refused(tmp_path, db):
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf={"pxe_filter": {"sync_period": 1}})
    try:
        daemon.wait_ready(30)
        elsewhere, link = swap(tmp_path, hostsdir)
        check_refused(daemon, hostsdir, elsewhere, link)
        assert "systemd stops dnsmasq with this service (BindsTo=)" in daemon.log_text()
    finally:
        daemon.stop()


@pytest.mark.netns
def test_swapped_hostsdir_stops_dnsmasq(tmp_path, db, netns_pair, dhcp_client):
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    daemon = rig.start(tmp_path, db, hostsdir, netns_pair)
    try:
        dhcp_client.await_offer(ALLOWED, offered=True, within=5)
        assert dhcp_client.discover(DENIED, control=ALLOWED) is None
        elsewhere, link = swap(tmp_path, hostsdir)
        check_refused(daemon, hostsdir, elsewhere, link)
        assert "dnsmasq stopped. Put the real directory back" in daemon.log_text()
        served = rig.served_during(dhcp_client, [ALLOWED, DENIED], 1.0)
        assert served == {ALLOWED: 0, DENIED: 0}, served
    finally:
        daemon.stop()
