"""The shipped systemd units, read from ``systemd/`` and pointed at this environment."""

import sys
from pathlib import Path

from pxe_filter.dnsmasq import config

ROOT = Path(__file__).resolve().parents[2]


def unit_text(name: str) -> str:
    """The shipped unit file ``name``."""
    return (ROOT / "systemd" / name).read_text()


def localised(text: str) -> str:
    """The unit with its binaries pointing at the ones installed in this environment.

    Nothing else changes, except that ``User=ironic-inspection`` goes: the service user does
    not exist on a test machine.
    """
    script = Path(sys.executable).parent / "ironic-pxe-filter"
    assert script.exists(), f"{script} missing: install the project (pip install -e .)"
    for name in ("ironic-inspection-api", "ironic-inspection-worker"):
        text = text.replace(f"/usr/bin/{name}", str(script.with_name(name)))
    text = text.replace("User=ironic-inspection\nGroup=ironic-inspection\n", "")
    return (text.replace("/usr/bin/ironic-pxe-filter", str(script))
                .replace("/usr/sbin/dnsmasq", config.find_dnsmasq()))
