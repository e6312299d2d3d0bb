"""Run ``ironic-pxe-filter`` as a real subprocess, with a generated configuration.

READY is observed the way systemd observes it: through a datagram socket named in
$NOTIFY_SOCKET (see tests.support.processes). Usage::

    daemon = start_filter(tmp_path, db_url, hostsdir, extra_conf={"pxe_filter": {"sync_period": 1}})
    daemon.wait_ready(15)
    ...
    assert daemon.stop() == 0
"""

import functools
import subprocess
from pathlib import Path
from typing import Any

from tests.support.processes import (
    ServiceProcess,
    console_script,
    service_sections,
    spawn,
    write_config,
)

__all__ = ["FilterProcess", "filter_command", "run_filter", "start_filter", "write_config"]


def filter_command() -> list[str]:
    """argv prefix that runs the installed console script (or the module as a fallback)."""
    return console_script("ironic-pxe-filter", "pxe_filter.cmd")


class FilterProcess(ServiceProcess):
    """A running ironic-pxe-filter: a ServiceProcess that also knows its ``hostsdir``."""

    ready_timeout = 20.0
    wait_timeout = 10.0
    stop_timeout = 5.0

    def __init__(self, *args: Any, hostsdir: Path, **kwargs: Any) -> None:
        super().__init__(*args, label="ironic-pxe-filter", **kwargs)
        self.hostsdir = hostsdir


def start_filter(tmp_path: Path, db_url: str, hostsdir: Path | str,
                 transport_url: str | None = None, extra_conf: dict | None = None, *,
                 name: str = "filter", debug: bool = True,
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None
                 ) -> FilterProcess:
    """Start ``ironic-pxe-filter`` on a generated config in ``tmp_path`` (does not wait).

    ``extra_conf`` is {section: {option: value}} merged over the generated sections; ``name``
    keeps the config, log and RPC server name of several daemons in one test apart; ``env``
    adds environment variables (e.g. WATCHDOG_USEC).
    """
    # Each daemon reads dnsmasq's lease reports from a spool of its own.
    spool = {"lease_report_dir": str(Path(tmp_path) / f"{name}-leases")}
    sections = service_sections(db_url, transport_url, name,
                                {"pxe_filter": {"dhcp_hostsdir": str(hostsdir)},
                                 "dnsmasq": spool}, extra_conf)
    return spawn(filter_command(), name, Path(tmp_path), sections, debug=debug,
                 extra_args=extra_args, env=env,
                 process_class=functools.partial(FilterProcess, hostsdir=Path(hostsdir)))


def run_filter(tmp_path: Path, db_url: str, hostsdir: Path | str, *args: str,
               extra_conf: dict | None = None, timeout: float = 60.0,
               name: str = "once") -> subprocess.CompletedProcess:
    """Run the daemon to completion (``--once`` or a start-up failure); capture its output."""
    proc = start_filter(tmp_path, db_url, hostsdir, extra_conf=extra_conf, name=name,
                        debug=False, extra_args=args)
    try:
        code = proc.wait(timeout)
    finally:
        proc.stop()
    return subprocess.CompletedProcess(proc.proc.args, code, "", proc.log_text())
