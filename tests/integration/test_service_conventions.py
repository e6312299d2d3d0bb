"""OpenStack conventions of every command: ``--version``, and option values logged at DEBUG
on start (secrets masked), as oslo.service-based services do."""

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support.daemon import run_filter
from tests.support.services_procs import start_api

BIN = Path(sys.executable).parent
VERSION = metadata.version("ironic-pxe-filter")


@pytest.mark.parametrize("command", [
    ["ironic-pxe-filter"], ["ironic-pxe-filter", "status"],
    ["ironic-pxe-filter", "render-dnsmasq-config"], ["ironic-inspection"],
    ["ironic-inspection-api"], ["ironic-inspection-worker"]])
def test_every_command_prints_its_version(command):
    result = subprocess.run([str(BIN / command[0]), *command[1:], "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{' '.join(command)} {VERSION}"


def test_api_logs_option_values_at_debug_with_secrets_masked(tmp_path):
    url = f"sqlite:///{tmp_path}/inspection.sqlite"
    migration.upgrade(create_engine(url))
    api = start_api(tmp_path, url, extra_conf={"DEFAULT": {"debug": True}})
    try:
        api.wait_ready()
    finally:
        assert api.stop() == 0, api.log_text()
    log = api.log_text()
    assert "api.max_limit" in log and "inspector.hooks" in log, log
    assert "database.connection            = ****" in log
    assert str(tmp_path) + "/inspection.sqlite" not in log


def test_filter_logs_option_values_at_debug(tmp_path):
    url = f"sqlite:///{tmp_path}/inspection.sqlite"
    migration.upgrade(create_engine(url))
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    result = run_filter(tmp_path, url, hostsdir, "--once", "--debug")
    assert result.returncode == 0, result.stderr
    assert "pxe_filter.sync_period" in result.stderr
    assert "database.connection            = ****" in result.stderr
