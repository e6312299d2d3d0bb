"""The filter daemon driving a real dnsmasq in a network namespace, for the filter's faults.

The daemon starts dnsmasq itself (``[dnsmasq]control = commands``: a supervised foreground
child in the server namespace) from the configuration ``render-dnsmasq-config`` writes, and
syncs every second. Offers are judged by real DHCPDISCOVERs (tests.support.dhcp_client).
"""

import json
import subprocess
import time
from pathlib import Path

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support import netns
from tests.support.daemon import FilterProcess, filter_command, start_filter, write_config
from tests.support.dhcp_client import DhcpClient


def migrate(url: str) -> str:
    """Create the schema in ``url``; return it."""
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    return url


def start(tmp_path: Path, db: str, hostsdir: Path, pair: netns.NetnsPair,
          control: str = "commands") -> FilterProcess:
    """The daemon (sync every second) with dnsmasq under ``control``; READY awaited."""
    sections: dict = {"pxe_filter": {"sync_period": 1}}
    if control == "commands":
        conf_file = tmp_path / "dnsmasq.conf"
        sections["dnsmasq"] = {
            "interface": netns.BRIDGE, "no_ping": True, "log_facility": "-", "user": "root",
            "dhcp_ranges": f"{netns.RANGE_START},{netns.RANGE_END},{netns.NETMASK}",
            "leasefile": str(tmp_path / "leases"), "config_file": str(conf_file),
            "pid_file": str(tmp_path / "dnsmasq.pid"), "control": "commands",
            "log_dhcp": False,
            "start_command": f"ip netns exec {pair.server} dnsmasq --keep-in-foreground "
                             f"--conf-file={conf_file}"}
        config = write_config(tmp_path / "render.conf", {
            "pxe_filter": {"dhcp_hostsdir": str(hostsdir)}, "dnsmasq": sections["dnsmasq"]})
        proc = subprocess.run([*filter_command(), "render-dnsmasq-config", "--config-file",
                               str(config)], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr  # includes dnsmasq --test
    daemon = start_filter(tmp_path, db, hostsdir, extra_conf=sections)
    daemon.wait_ready(30)
    return daemon


def status(daemon: FilterProcess, fmt: str = "json") -> tuple[int, str]:
    """``ironic-pxe-filter status`` for ``daemon``: (exit status, output)."""
    proc = subprocess.run([*filter_command(), "status", "--config-file",
                           str(daemon.config_path), "--format", fmt],
                          capture_output=True, text=True, timeout=30)
    return proc.returncode, proc.stdout + proc.stderr


def status_json(daemon: FilterProcess) -> dict:
    """The status command's JSON output."""
    return json.loads(status(daemon)[1])


def served_during(client: DhcpClient, macs: list[str], seconds: float
                  ) -> dict[str, float]:
    """Probe ``macs`` for ``seconds``; for each, the seconds during which it got offers
    (probes every ~0.25 s, each offer counted as the time since the previous probe)."""
    served = dict.fromkeys(macs, 0.0)
    start = last = time.monotonic()
    while (now := time.monotonic()) - start < seconds:
        answers = client.discover_many(macs, timeout=0.2)
        for mac, offer in answers.items():
            if offer is not None:
                served[mac] += now - last
        last = now
        time.sleep(0.05)
    return {mac: round(value, 2) for mac, value in served.items()}


def wait_until(predicate, timeout: float, what: str) -> float:
    """Seconds until ``predicate()`` is true; AssertionError after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout, f"not within {timeout} s: {what}"
        time.sleep(0.05)
    return time.monotonic() - start
