"""The filter's command line as an operator meets it: usage, exit statuses, pipes."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from pxe_filter.status.recorder import STATE_NAME
from tests.support.daemon import start_filter
from tests.support.filter_nodes import add_node

FILTER = str(Path(sys.executable).with_name("ironic-pxe-filter"))


@pytest.fixture
def synced(tmp_path, sqlite_url) -> Path:
    """A configuration whose filter ran one sync (so ``status`` has a state file)."""
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    add_node(sqlite_url, "inspect wait", ["52:54:00:0b:00:01"])
    conf = tmp_path / "filter.conf"
    conf.write_text(f"[database]\nconnection = {sqlite_url}\n"
                    f"[pxe_filter]\ndhcp_hostsdir = {tmp_path / 'hosts'}\n")
    done = subprocess.run([FILTER, "--config-file", str(conf), "--once"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return conf


def test_status_survives_a_closed_pipe(synced):
    # The reader is gone before the command writes (as `| head -c 1` once it has its byte).
    proc = subprocess.Popen([FILTER, "status", "--format", "json", "--config-file", str(synced)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    # 3: the daemon is not running (the sync above was a one-shot run), as without a pipe.
    assert (proc.returncode, err.decode()) == (3, "")
    piped = subprocess.run(["bash", "-o", "pipefail", "-c",
                            f"{FILTER} status --format json --config-file {synced} | head -c 1"],
                           capture_output=True, text=True, timeout=60)
    assert (piped.returncode, piped.stdout, piped.stderr) == (3, "{", "")


def test_unknown_command_lists_every_command():
    done = subprocess.run([FILTER, "frobnicate"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    usage = done.stderr.split("error:")[0]
    for command in ("ironic-pxe-filter [-h]", "ironic-pxe-filter render-dnsmasq-config",
                    "ironic-pxe-filter status", "ironic-pxe-filter explain"):
        assert command in usage
    assert "unknown command 'frobnicate'" in done.stderr


@pytest.mark.parametrize("content", ["[1, 2]", "{not json"])
def test_explain_answers_beside_a_broken_state_file(synced, content):
    (synced.parent / "hosts" / STATE_NAME).write_text(content)
    done = subprocess.run([FILTER, "explain", "52:54:00:0b:00:01", "--config-file",
                           str(synced)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert "dnsmasq will ALLOW it" in done.stdout
    assert "filter daemon:  unknown: cannot read the state file" in done.stdout


def test_help_shows_the_real_host_default():
    done = subprocess.run([FILTER, "--help"], capture_output=True, text=True, timeout=60)
    host = done.stdout.split("\n    host\n", 1)[1].split("\n    state_path", 1)[0]
    assert f"(default: {socket.gethostname()})" in " ".join(host.split())


def test_a_clean_stop_on_the_message_bus_logs_no_amqp_warning(tmp_path, sqlite_url, rabbit_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    daemon = start_filter(tmp_path, sqlite_url, tmp_path / "hosts", rabbit_url,
                          {"pxe_filter": {"ironic_notifications": "true"}}, debug=False)
    try:
        daemon.wait_ready()
    finally:
        assert daemon.stop() == 0
    log = daemon.log_text()
    assert "Stopping on signal" in log
    assert " WARNING " not in log and " ERROR " not in log, log
