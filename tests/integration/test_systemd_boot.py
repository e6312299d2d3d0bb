"""The shipped units under a real systemd (PID 1 in ``systemd-nspawn``), unchanged but for paths.

One container serves the module, and the tests run in order, as an operator's day would:
dnsmasq waits for the filter's first safe sync, READY tells the truth, ``systemctl reload``
re-reads the configuration, the watchdog restarts a hung filter, and a bad configuration shows
its reason in ``systemctl status``.
"""

import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support import filter_nodes, nspawn
from tests.support import units as shipped

pytestmark = pytest.mark.slow

FILTER, DNSMASQ = "ironic-pxe-filter.service", "ironic-inspection-dnsmasq.service"
MAC = "52:54:00:cc:00:01"
HOSTSDIR = "/var/lib/ironic-pxe-filter/hostsdir"
DB_INSIDE = "/var/lib/ironic-inspection/inspection.sqlite"
FILTER_CONF = """\
[database]
connection = sqlite:///{db}
[auto_discovery]
enabled = true
[pxe_filter]
dhcp_hostsdir = {hostsdir}
sync_period = 2
{extra}
[dnsmasq]
control = systemd
"""
DNSMASQ_OPTIONS = """\
[pxe_filter]
dhcp_hostsdir = {hostsdir}
[dnsmasq]
interface = pxe0
dhcp_ranges = 192.0.2.10,192.0.2.100,255.255.255.0
no_ping = true
log_facility = -
"""


def _poll(what: str, check: Callable[[], bool], machine: nspawn.Machine, timeout: float = 30,
          unit: str = FILTER) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            status = machine.systemctl("status", "--no-pager", "-n", "30", unit, check=False)
            raise AssertionError(f"{what}: not within {timeout} s\n{status.stdout}")
        time.sleep(0.2)


class Host:
    """The container with the project's units and configuration, and its SQLite database."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.units = workdir / "units"
        self.etc = workdir / "etc-filter"
        self.db_dir = workdir / "db"
        for path in (self.units, self.etc, self.db_dir, workdir / "etc-inspection"):
            path.mkdir()
        (workdir / "etc-inspection" / "shared.conf").write_text("[DEFAULT]\n")
        self.db_url = f"sqlite:///{self.db_dir / 'inspection.sqlite'}"
        for name in (FILTER, DNSMASQ):
            (self.units / name).write_text(shipped.localised(shipped.unit_text(name)))
        # Operator drop-ins, as docs/dnsmasq.md describes: where the rendered dnsmasq.conf
        # lives, and a shorter watchdog so the test need not wait a minute.
        self.drop_in(DNSMASQ, "conf", "[Service]\n"
                     "Environment=DNSMASQ_CONF=/etc/ironic-pxe-filter/dnsmasq.conf\n")
        self.drop_in(FILTER, "watchdog", "[Service]\nWatchdogSec=10\n")
        if Path(sys.base_prefix).resolve().is_relative_to("/root"):
            # Test machines keep Python under /root, which ProtectHome=yes hides; a real
            # install's interpreter lives in /usr.
            self.drop_in(FILTER, "python", "[Service]\nProtectHome=read-only\n")
        if nspawn.ROOT.is_relative_to("/tmp"):
            # A checkout under /tmp (a CI clone) holds the venv the units run, which their
            # private /tmp would hide; a real install lives in /usr or /opt.
            for unit in (FILTER, DNSMASQ):
                self.drop_in(unit, "tmp", f"[Service]\nBindReadOnlyPaths={nspawn.ROOT}\n")
        self.write_conf()
        self._render_dnsmasq_conf()
        self.machine = nspawn.Machine(workdir, [
            (self.units, "/etc/systemd/system", True),
            (workdir / "etc-inspection", "/etc/ironic-inspection", False),
            (self.etc, "/etc/ironic-pxe-filter", False),
            (self.db_dir, "/var/lib/ironic-inspection", True)])

    def drop_in(self, unit: str, name: str, text: str) -> None:
        directory = self.units / f"{unit}.d"
        directory.mkdir(exist_ok=True)
        (directory / f"{name}.conf").write_text(text)

    def write_conf(self, extra: str = "") -> None:
        (self.etc / "ironic-pxe-filter.conf").write_text(
            FILTER_CONF.format(db=DB_INSIDE, hostsdir=HOSTSDIR, extra=extra))

    def _render_dnsmasq_conf(self) -> None:
        options = self.workdir / "dnsmasq-options.conf"
        options.write_text(DNSMASQ_OPTIONS.format(hostsdir=HOSTSDIR))
        script = Path(sys.executable).parent / "ironic-pxe-filter"
        result = subprocess.run(
            [str(script), "render-dnsmasq-config", "--config-file", str(options), "--output", "-"],
            capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        (self.etc / "dnsmasq.conf").write_text(result.stdout)

    def hostsdir_file(self, name: str) -> str | None:
        try:
            return self.machine.path(f"{HOSTSDIR}/{name}").read_text()
        except OSError:
            return None


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> Iterator[Host]:
    host = Host(tmp_path_factory.mktemp("systemd"))
    host.machine.boot()
    # The provisioning interface dnsmasq serves (the container has only loopback; the
    # kernel may lack the dummy module, veth is always there).
    for argv in (["ip", "link", "add", "pxe0", "type", "veth", "peer", "name", "pxe1"],
                 ["ip", "addr", "add", "192.0.2.1/24", "dev", "pxe0"],
                 ["ip", "link", "set", "pxe1", "up"], ["ip", "link", "set", "pxe0", "up"]):
        host.machine.run(argv)
    yield host
    host.machine.stop()


def test_dnsmasq_starts_only_after_the_filters_first_safe_sync(host):
    machine = host.machine
    engine = create_engine(host.db_url)
    migration.upgrade(engine)
    engine.dispose()
    filter_nodes.add_node(host.db_url, "inspect wait", [MAC])
    # Hold the database so the filter's first sync cannot read it (a rollback journal makes
    # readers wait for an exclusive lock): it must not report READY meanwhile.
    lock = sqlite3.connect(host.db_dir / "inspection.sqlite", isolation_level=None)
    try:
        lock.execute("PRAGMA journal_mode=DELETE")
        lock.execute("BEGIN EXCLUSIVE")
        machine.systemctl("start", "--no-block", DNSMASQ)
        _poll("the filter starts", lambda: machine.show(FILTER, "MainPID")["MainPID"] != "0",
              machine)
        time.sleep(2)
        assert machine.show(FILTER, "ActiveState")["ActiveState"] == "activating"
        assert machine.show(DNSMASQ, "ActiveState")["ActiveState"] == "inactive"
        # Before its first sync the filter may only have closed the door.
        assert host.hostsdir_file(MAC) is None
        assert host.hostsdir_file("unknown_hosts_filter") in (None, "*:*:*:*:*:*,ignore\n")
    finally:
        lock.close()
    # StateDirectory= made the hostsdir, readable by dnsmasq's user.
    assert machine.path(HOSTSDIR).stat().st_mode & 0o777 == 0o755

    _poll("dnsmasq runs", lambda: machine.show(DNSMASQ, "ActiveState")["ActiveState"]
          == "active", machine, unit=DNSMASQ)
    times = {unit: machine.show(unit, "ActiveEnterTimestampMonotonic",
                                "ExecMainStartTimestampMonotonic") for unit in (FILTER, DNSMASQ)}
    ready = int(times[FILTER]["ActiveEnterTimestampMonotonic"])
    assert 0 < ready <= int(times[DNSMASQ]["ExecMainStartTimestampMonotonic"])
    assert host.hostsdir_file(MAC) == f"{MAC}\n"
    assert host.hostsdir_file("unknown_hosts_filter") == "*:*:*:*:*:*\n"


def test_ready_reports_what_was_written(host):
    status = host.machine.show(FILTER, "StatusText")["StatusText"]
    assert "1 MAC(s) allowed" in status, status


def test_reload_rereads_the_configuration(host):
    machine = host.machine
    host.write_conf(extra="deny_unknown_macs = true")
    result = machine.systemctl("reload", FILTER, check=False)
    assert result.returncode == 0, machine.run(["journalctl", "--no-pager", "-n", "60"],
                                               check=False).stdout
    _poll("unknown MACs denied after reload",
          lambda: host.hostsdir_file("unknown_hosts_filter") == "*:*:*:*:*:*,ignore\n", machine)
    assert machine.show(FILTER, "StatusText")["StatusText"].startswith("reloaded")
    assert machine.show(FILTER, "ActiveState")["ActiveState"] == "active"


def test_the_watchdog_restarts_a_hung_filter(host):
    machine = host.machine
    before = machine.show(FILTER, "MainPID", "NRestarts")
    # "kill -STOP 0" would stop the test's own nsenter and hang it: no filter, no signal.
    assert before["MainPID"] != "0", machine.run(
        ["journalctl", "--no-pager", "-u", FILTER], check=False).stdout[-2000:]
    machine.run(["kill", "-STOP", before["MainPID"]])

    def restarted() -> bool:
        now = machine.show(FILTER, "MainPID", "NRestarts", "ActiveState")
        return (int(now["NRestarts"]) > int(before["NRestarts"])
                and now["MainPID"] not in ("0", before["MainPID"])
                and now["ActiveState"] == "active")

    _poll("the watchdog restarted the filter", restarted, machine, timeout=60)
    journal = machine.run(["journalctl", "--no-pager", "-u", FILTER], check=False).stdout
    assert "Watchdog timeout" in journal, journal[-2000:]
    # BindsTo=/PartOf=: dnsmasq went down with the filter and came back after its READY.
    _poll("dnsmasq back", lambda: machine.show(DNSMASQ, "ActiveState")["ActiveState"]
          == "active", machine, unit=DNSMASQ)


def test_a_bad_configuration_shows_its_reason_in_status(host):
    machine = host.machine
    host.write_conf(extra="sync_period = -5")
    machine.systemctl("restart", "--no-block", FILTER)
    _poll("the filter fails", lambda: machine.show(FILTER, "ActiveState")["ActiveState"]
          in ("failed", "activating") and machine.show(FILTER, "Result")["Result"] != "success",
          machine)
    status = machine.systemctl("status", "--no-pager", "-n", "20", FILTER, check=False).stdout
    journal = machine.run(["journalctl", "--no-pager", "-n", "30"], check=False).stdout
    # The Status: line names the reason (not a stale "stopping").
    assert re.search(r'Status: "(failed|configuration error): invalid (configuration|value)',
                     status), status + journal
    assert "sync_period" in status, status
    host.write_conf()
    machine.systemctl("reset-failed", FILTER, check=False)
    machine.systemctl("restart", FILTER)
    assert machine.show(FILTER, "ActiveState")["ActiveState"] == "active"

