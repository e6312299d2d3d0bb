"""ironic-pxe-filter starts, reloads and restarts a real dnsmasq in a network namespace.

dnsmasq runs the configuration ``ironic-pxe-filter render-dnsmasq-config`` wrote; the daemon
starts it (``commands``: supervised foreground child; ``pidfile``: daemonised, found by its pid
file) only after its first sync. Offers are judged by real DHCPDISCOVERs.
"""

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from inspection.db.models import Port
from pxe_filter.common.database import create_engine
from tests.support.daemon import start_filter
from tests.support.dhcp_fixtures import dnsmasq_sections
from tests.support.filter_nodes import add_node, set_state

pytestmark = pytest.mark.netns
pytest_plugins = ["tests.support.dhcp_fixtures"]

ALLOWED, DENIED, UNKNOWN = "52:54:00:dd:00:01", "52:54:00:dd:00:02", "52:54:00:dd:00:03"


def dnsmasq_pid(tmp_path: Path) -> int | None:
    try:
        pid = int((tmp_path / "dnsmasq.pid").read_text())
        return pid if Path(f"/proc/{pid}/comm").read_text().strip() == "dnsmasq" else None
    except (OSError, ValueError):
        return None


def wait_for(predicate, timeout: float, what: str) -> float:
    start = time.perf_counter()
    while not predicate():
        assert time.perf_counter() - start < timeout, what
        time.sleep(0.0005)
    return time.perf_counter() - start


@pytest.mark.parametrize("mode", ["commands", "pidfile"])
def test_daemon_runs_dnsmasq_and_heals_the_hostsdir(  # noqa: PLR0917 - fixtures
        tmp_path, db, hostsdir, netns_pair, dhcp_client, kill_pidfile_dnsmasq, mode):
    add_node(db, "inspect wait", [ALLOWED])
    add_node(db, "manageable", [DENIED])
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, mode, deny_unknown_macs=True,
                                sync_period=3600)
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections)
    try:
        daemon.wait_ready(20)
        log = daemon.wait_log("INFO pxe_filter: Ready")
        # Start order: wildcard, first sync, then dnsmasq, then READY.
        assert log.index("First sync") < log.index("Started dnsmasq") < log.index("Ready")
        dhcp_client.await_offer(ALLOWED, offered=True, within=3)
        assert dhcp_client.discover(DENIED, control=ALLOWED) is None
        assert dhcp_client.discover(UNKNOWN, control=ALLOWED) is None

        # A hand-deleted allow file: dnsmasq would keep the MAC until SIGHUP, then drop it.
        os.unlink(hostsdir / ALLOWED)
        took = wait_for(lambda: (hostsdir / ALLOWED).exists(), 0.1, "allow file not restored")
        # After a SIGHUP dnsmasq forgets deleted files: the restored one keeps the MAC served.
        os.kill(dnsmasq_pid(tmp_path), signal.SIGHUP)
        time.sleep(0.1)
        assert dhcp_client.discover(ALLOWED) is not None
        print(f"deleted allow file restored in {took * 1000:.1f} ms")

        # A hand-written allow file for a denied MAC: reverted, no offer.
        (hostsdir / DENIED).write_text(f"{DENIED}\n")
        took = wait_for(lambda: (hostsdir / DENIED).read_text() == f"{DENIED},ignore\n", 0.1,
                        "allow file for a denied MAC not reverted")
        print(f"hand-written allow reverted in {took * 1000:.1f} ms")
        time.sleep(0.05)
        assert dhcp_client.discover(DENIED, control=ALLOWED) is None
        # write_text() truncates before it writes: the watcher may see either step first.
        log = daemon.wait_log(f"{hostsdir / DENIED} was ")
        assert any(f"{hostsdir / DENIED} was {what} by someone else: restored to deny" in log
                   for what in ("edited", "truncated")), log
        running = dnsmasq_pid(tmp_path)
        assert running is not None
        if mode == "commands":  # a supervised dnsmasq that dies is started again
            os.kill(running, signal.SIGKILL)
            wait_for(lambda: dnsmasq_pid(tmp_path) not in (None, running), 5,
                     "dnsmasq not restarted")
            dhcp_client.await_offer(ALLOWED, offered=True, within=3)
            daemon.wait_log(f"dnsmasq (pid {running}) exited with status -9; restarting it")
    finally:
        assert daemon.stop() == 0, daemon.log_text()
    time.sleep(0.2)
    # commands: a supervised child stops with the daemon; pidfile: dnsmasq keeps serving.
    assert (dnsmasq_pid(tmp_path) is not None) == (mode == "pidfile")


@pytest.mark.parametrize("mode", ["commands", "pidfile"])
def test_no_offer_to_a_denied_mac_across_daemon_restarts(  # noqa: PLR0917 - fixtures
        tmp_path, db, hostsdir, netns_pair, dhcp_client, kill_pidfile_dnsmasq, mode):
    add_node(db, "inspect wait", [ALLOWED])
    add_node(db, "manageable", [DENIED])
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, mode, deny_unknown_macs=True)
    offers: list[str] = []
    probes = [0]
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            answers = dhcp_client.discover_many([DENIED, UNKNOWN, ALLOWED], timeout=0.2)
            probes[0] += 1
            offers.extend(mac for mac in (DENIED, UNKNOWN) if answers[mac] is not None)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        for round_ in range(3):
            daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections,
                                  name=f"filter{round_}")
            daemon.wait_ready(20)
            dhcp_client.await_offer(ALLOWED, offered=True, within=3)
            assert daemon.stop() == 0, daemon.log_text()
    finally:
        stop.set()
        prober.join()
    assert probes[0] > 10
    assert offers == []


def test_an_out_of_scope_node_on_inspection_gets_no_offer(tmp_path, db, hostsdir, netns_pair,
                                                         dhcp_client):
    """A filter of conductor group rack1: a rack2 node on inspection stays unanswered while
    rack1's node and unknown MACs (a rack1 node is on inspection) are served."""
    add_node(db, "inspect wait", [ALLOWED], conductor_group="rack1")
    add_node(db, "inspect wait", [DENIED], conductor_group="rack2")
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, "commands", sync_period=3600,
                                conductor_groups="rack1")
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections)
    try:
        daemon.wait_ready(20)
        dhcp_client.await_offer(ALLOWED, offered=True, within=3)
        assert dhcp_client.discover(UNKNOWN) is not None
        assert dhcp_client.discover(DENIED, control=ALLOWED) is None
    finally:
        assert daemon.stop() == 0, daemon.log_text()


def test_20000_flips_are_all_honoured(tmp_path, db, hostsdir, netns_pair, dhcp_client):
    count = 20000
    macs = [f"52:54:02:00:{i >> 8:02x}:{i & 255:02x}" for i in range(count)]
    every = 25  # one control MAC (always served) after every 25 flipped ones
    controls = [f"52:54:03:00:{i >> 8:02x}:{i & 255:02x}" for i in range(count // every)]
    flipped = add_node(db, "manageable", macs)
    add_node(db, "inspect wait", controls)
    # poll_interval 0: the full sync, not the change poll, is what rewrites them here
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, "commands", log_dhcp=False,
                                deny_unknown_macs=True, sync_period=1, poll_interval=0)
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections, debug=False)
    try:
        daemon.wait_ready(60)
        took = dhcp_client.await_offer(controls[0], offered=True, within=15)
        print(f"first offer {took:.1f} s after READY")
        # Refusals are judged fast: an offer to a later control MAC closes earlier requests.
        probe_order = []
        for i, mac in enumerate(macs):
            probe_order.append(mac)
            if i % every == every - 1:
                probe_order.append(controls[i // every])
        for round_, (state, offered) in enumerate((("inspect wait", True),
                                                   ("manageable", False))):
            set_state(db, flipped, state)
            daemon.wait_log(f"a sync rewrote {count} files", timeout=60,
                            start=len(daemon.log_text()) if round_ else 0)
            start = time.monotonic()
            # dnsmasq digests the burst (its inotify events, then the SIGHUP) before it
            # answers again: wait for a control MAC, then probe everything.
            dhcp_client.await_offer(controls[-1], offered=True, within=60)
            busy = time.monotonic() - start
            answers = dhcp_client.discover_many(probe_order, timeout=1.0, window=64)
            # A lost datagram reads as "no offer": ask again for those (an offer is never
            # spurious, so MACs that got one need no second look).
            unanswered = [mac for mac in probe_order if answers[mac] is None]
            if offered and unanswered:
                answers.update(dhcp_client.discover_many(unanswered, timeout=0.5, window=64))
            took = time.monotonic() - start
            wrong = [mac for mac in macs if (answers[mac] is not None) != offered]
            assert not any(answers[c] is None for c in controls)
            print(f"{count} MACs {'allowed' if offered else 'denied'}: dnsmasq busy for "
                  f"{busy:.1f} s, all checked after {took:.1f} s")
            assert wrong == [], f"{len(wrong)} MAC(s) not {state}: {wrong[:5]}"
        # The daemon drains its watcher's queue while it writes: its own 20,000-file
        # bursts never overflow it into a re-read of every file.
        assert "inotify queue overflowed" not in daemon.log_text()
    finally:
        assert daemon.stop() == 0, daemon.log_text()[-3000:]


def test_replaced_hostsdir_is_restored_and_dnsmasq_restarted(tmp_path, db, hostsdir,
                                                             netns_pair, dhcp_client):
    node = add_node(db, "inspect wait", [ALLOWED])
    control = "52:54:00:dd:00:10"
    add_node(db, "inspect wait", [control])
    add_node(db, "manageable", [DENIED])
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, "commands",
                                deny_unknown_macs=True, sync_period=1)
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections)
    try:
        daemon.wait_ready(20)
        dhcp_client.await_offer(ALLOWED, offered=True, within=3)
        os.rename(hostsdir, tmp_path / "old-hostsdir")
        # An empty directory would serve everyone; the daemon, which checks every second,
        # may have put one there already, which is the same case to handle.
        hostsdir.mkdir(exist_ok=True)
        daemon.wait_log("dnsmasq restarted on the restored hostsdir")
        assert "CRITICAL pxe_filter.daemon: The hostsdir" in daemon.log_text()
        assert (hostsdir / DENIED).read_text() == f"{DENIED},ignore\n"
        dhcp_client.await_offer(ALLOWED, offered=True, within=3)
        assert dhcp_client.discover(DENIED, control=ALLOWED) is None
        assert dhcp_client.discover(UNKNOWN, control=ALLOWED) is None
        # The new dnsmasq watches the new directory: a one-file change applies without SIGHUP.
        set_state(db, node, "manageable")
        dhcp_client.await_offer(ALLOWED, offered=False, within=3, control=control)
        assert "dnsmasq reloaded" not in daemon.log_text()
    finally:
        assert daemon.stop() == 0, daemon.log_text()


def test_purge_deletes_stale_files_with_a_reload(tmp_path, db, hostsdir, netns_pair,
                                                 dhcp_client):
    stale = "52:54:00:dd:00:20"
    waiting = add_node(db, "inspect wait", [ALLOWED])  # on inspection: unknown MACs allowed
    add_node(db, "manageable", [stale])
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, "commands",
                                sync_period=1, purge_stale_files=True)
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections)
    try:
        daemon.wait_ready(20)
        dhcp_client.await_offer(ALLOWED, offered=True, within=3)
        engine = create_engine(db)
        with engine.begin() as conn:
            conn.execute(sa.delete(Port).where(Port.address == stale))
        engine.dispose()
        # The stale MAC follows the unknown-MAC policy (allowed), then its file goes.
        daemon.wait_log("Purged 1 file(s) of MACs without a port; dnsmasq reloaded")
        assert not (hostsdir / stale).exists()
        assert dhcp_client.discover(stale) is not None
        # Nothing on inspection any more: unknown MACs denied. Without the reload at purge
        # time dnsmasq would still hold the deleted allow line and serve the stale MAC.
        set_state(db, waiting, "manageable")
        wait_for(lambda: (hostsdir / "unknown_hosts_filter").read_text().endswith("ignore\n"),
                 5, "wildcard not denied")
        time.sleep(0.1)
        assert dhcp_client.discover(stale, timeout=1.5) is None
        assert dhcp_client.discover(UNKNOWN, timeout=0.5) is None
    finally:
        assert daemon.stop() == 0, daemon.log_text()


def test_files_the_filter_did_not_write_stop_allowing_at_once(tmp_path, db, hostsdir,
                                                              netns_pair, dhcp_client):
    add_node(db, "inspect wait", [ALLOWED])
    add_node(db, "manageable", [DENIED])
    # Present before the start: removed by the first sync, before dnsmasq ever runs.
    (hostsdir / "zz-early").write_text(f"{DENIED}\n")
    sections = dnsmasq_sections(tmp_path, netns_pair, hostsdir, "commands",
                                deny_unknown_macs=True, sync_period=3600)
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections)
    try:
        daemon.wait_ready(20)
        assert not (hostsdir / "zz-early").exists()
        dhcp_client.await_offer(ALLOWED, offered=True, within=3)
        assert dhcp_client.discover(DENIED, control=ALLOWED) is None
        # dnsmasq reads these at once (inotify); each must be gone and forgotten (SIGHUP).
        # Other spellings of a MAC are foreign too: only the lower-case colon name is ours.
        foreign = {"zz-extra": f"{DENIED}\n", "zz-all": "*:*:*:*:*:*\n",
                   f"{DENIED}.bak": f"{DENIED}\n", DENIED.upper(): f"{DENIED}\n",
                   UNKNOWN.replace(":", "-"): f"{UNKNOWN}\n"}
        for name, text in foreign.items():
            (hostsdir / name).write_text(text)
        wait_for(lambda: not any((hostsdir / name).exists() for name in foreign), 2,
                 "foreign files not removed")
        for name in foreign:
            daemon.wait_log(f"Removed {hostsdir / name}: the filter did not write it")
        # One reload per batch the watcher saw (the three may come in one or several).
        log = daemon.wait_log("file(s) the filter did not write left the hostsdir")
        assert "INFO pxe_filter.daemon: dnsmasq reloaded after " in log
        assert "Traceback" not in log
        time.sleep(0.2)  # dnsmasq re-reads the directory on SIGHUP
        offers = [dhcp_client.discover(mac, control=ALLOWED) for mac in (DENIED, UNKNOWN)
                  for _ in range(5)]
        assert offers == [None] * 10
    finally:
        assert daemon.stop() == 0, daemon.log_text()
