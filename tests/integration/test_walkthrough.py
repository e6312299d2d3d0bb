"""docs/walkthrough.md works: its shell blocks run in order, in one shell, on a fresh machine.

The blocks run verbatim in a throwaway copy of /etc, /var/lib and /run (tests.support.fresh_root)
from the checkout, with the site values of the walkthrough's step 3 set for this machine: a
RabbitMQ user and vhost of the test's own, the API on 127.0.0.1, dnsmasq's interface lo
(dnsmasq is checked with --test, not started).
"""

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import services
from tests.support.fresh_root import FreshRoot

REPO = Path(__file__).resolve().parents[2]
WALKTHROUGH = REPO / "docs" / "walkthrough.md"
SKIP = re.compile(r"<!-- not run in CI: (.+) -->")
BLOCK = re.compile(r"(?:^(<!--[^\n]*-->)\n)?^```sh\n(.*?)^```$", re.M | re.S)


def blocks() -> tuple[list[str], list[str]]:
    """(blocks to run, reasons of the blocks not run)."""
    run, skipped = [], []
    for comment, text in BLOCK.findall(WALKTHROUGH.read_text()):
        reason = SKIP.fullmatch(comment) if comment else None
        if reason:
            skipped.append(reason[1])
        else:
            run.append(text)
    return run, skipped


def test_only_the_documented_blocks_are_left_out():
    run, skipped = blocks()
    assert len(run) >= 10
    assert skipped == [".ci/run installs the same packages",
                       "the test puts the checkout's .venv/bin (made by scripts/bootstrap) "
                       "first in PATH instead",
                       "needs systemd as PID 1"]


@pytest.fixture
def rabbit_site():
    """Step 3's RabbitMQ values, unique to this test; the user and vhost go afterwards."""
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        services.unavailable("rabbitmqctl", "install rabbitmq-server")
    name = f"walkthrough_{secrets.token_hex(5)}"
    yield {"RABBIT_USER": name, "RABBIT_VHOST": name, "RABBIT_PASSWORD": secrets.token_hex(8)}
    for command in (["delete_vhost", name], ["delete_user", name]):
        subprocess.run([ctl, "-q", *command], capture_output=True, timeout=60)


def test_walkthrough_runs_on_a_fresh_machine(tmp_path, rabbit_site):
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", 6385)) == 0:
            services.unavailable("port 6385", "something listens on 127.0.0.1:6385")
    run, _ = blocks()
    # nsenter starts in /: the walkthrough runs from the checkout.
    script = f"set -euo pipefail\ncd {REPO}\n" + "\n".join(run)
    env = {**os.environ, **rabbit_site,
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PROVISIONING_IF": "lo", "PROVISIONING_IP": "127.0.0.1",
           "DHCP_RANGE": "192.0.2.100,192.0.2.200,255.255.255.0",
           "API_USER": "admin", "API_PASSWORD": secrets.token_hex(8), "PYTHONUNBUFFERED": "1"}
    env.pop("IRONIC_INSPECTION_URL", None)
    fresh = FreshRoot(tmp_path / "scratch")
    try:
        result = fresh.run(["bash", "-c", script], env=env, timeout=240)
    finally:
        fresh.close()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "Created schema revision" in output
    assert "/var/lib/ironic-pxe-filter/dnsmasq.conf: written" in output
    assert "*:*:*:*:*:*\n" in result.stdout  # unknown machines may boot
    assert "IPMI credentials of freshly discovered nodes" in result.stdout  # rule list
    assert "52:54:00:6e:1a:01,ignore\n" in result.stdout  # enrolled, then denied
    assert "enroll" in result.stdout  # node list
    # The imported rules matched the BMC address: node list shows the ipmi driver.
    assert re.search(r"\bipmi\b.*\benroll\b", result.stdout)
