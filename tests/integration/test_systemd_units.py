"""The shipped systemd units: `systemd-analyze verify` accepts them, and the dnsmasq unit's
start guards really refuse what they must.

verify checks that every ExecStart binary exists, so the units are verified from a copy whose
ironic-pxe-filter path points at this environment's console script (and dnsmasq at the one
installed here); nothing else is changed.
"""

import configparser
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from pxe_filter.common import config as common_config
from tests.support import services
from tests.support import units as shipped

REPO = Path(__file__).resolve().parents[2]
UNITS = ("ironic-pxe-filter.service", "ironic-inspection-dnsmasq.service")
FILTER, DNSMASQ = UNITS
SERVICE_UNITS = ("ironic-inspection-api.service", "ironic-inspection-worker.service")


def verify(directory: Path, units: dict[str, str]) -> list[str]:
    """Write ``units`` to ``directory``, run `systemd-analyze verify`; the problems it reports."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        services.unavailable("systemd-analyze", "install the Debian package 'systemd'")
    paths = []
    for name, text in units.items():
        (directory / name).write_text(text)
        paths.append(str(directory / name))
    proc = subprocess.run([tool, "verify", "--man=no", *paths], capture_output=True, text=True,
                          timeout=60)
    # Lines about our units only: verify may also comment on unrelated units of this host.
    problems = [line for line in proc.stderr.splitlines()
                if str(directory) in line or any(name in line for name in units)]
    if proc.returncode != 0 and not problems:
        problems = [f"exit status {proc.returncode}: {proc.stderr.strip()}"]
    return problems


def test_units_verify_cleanly(tmp_path):
    units = {name: shipped.localised(shipped.unit_text(name)) for name in UNITS}
    assert verify(tmp_path, units) == []


def test_api_and_worker_units_verify_cleanly(tmp_path):
    units = {name: shipped.localised(shipped.unit_text(name)) for name in SERVICE_UNITS}
    assert verify(tmp_path, units) == []
    for name in SERVICE_UNITS:
        assert _section(name, "Service")["Type"] == "notify"  # both send READY=1


@pytest.mark.parametrize(("mutation", "expected"), [
    (lambda t: t.replace("[Service]\n", "[Service]\nWatchdogSecs=60\n", 1),
     "WatchdogSecs"),  # wording differs between systemd versions
    (lambda t: t.replace("Type=notify", "Type=notified"), "Failed to parse service type"),
    (lambda t: t.replace("/bin/kill", "/bin/no-such-kill"), "no-such-kill"),
], ids=["unknown-key", "bad-value", "missing-binary"])
def test_verify_reports_real_errors(tmp_path, mutation, expected):
    """The check above can fail: a broken copy of the filter unit is reported."""
    units = {name: shipped.localised(shipped.unit_text(name)) for name in UNITS}
    units[FILTER] = mutation(units[FILTER])
    problems = verify(tmp_path, units)
    assert any(expected in line for line in problems), problems


@pytest.mark.parametrize(("unit", "own"), [
    (FILTER, common_config.FILTER_CONFIG),
    ("ironic-inspection-api.service", common_config.INSPECTION_CONFIG),
    ("ironic-inspection-worker.service", common_config.INSPECTION_CONFIG),
])
def test_every_service_reads_the_shared_file_then_its_own(unit, own):
    argv = shlex.split(_exec_lines(unit, "ExecStart")[0])
    files = [argv[i + 1] for i, word in enumerate(argv) if word == "--config-file"]
    assert files == [common_config.SHARED_CONFIG, own]
    for path in files:  # shipped in etc/ under the name the unit reads
        assert (REPO / "etc" / Path(path).relative_to("/etc")).is_file(), path


def _section(name: str, section: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(shipped.unit_text(name))
    return parser[section]


def test_dnsmasq_unit_is_bound_to_the_filter():
    unit = _section(DNSMASQ, "Unit")
    assert FILTER in unit["After"].split()
    assert FILTER in unit["BindsTo"].split()
    assert FILTER in unit["PartOf"].split()
    assert FILTER in _section(DNSMASQ, "Install")["WantedBy"].split()
    service = _section(FILTER, "Service")
    assert service["Type"] == "notify"  # After= waits for READY=1, i.e. the first full sync
    assert service["UMask"] == "0022"


def _exec_lines(name: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in shipped.unit_text(name).splitlines()
            if line.startswith(f"{key}=")]


def _expand(line: str, env: dict[str, str]) -> list[str]:
    """An Exec line as systemd runs it: words split, ${VAR} expanded, $$ turned into $."""
    def one(match: re.Match) -> str:
        return "$" if match[0] == "$$" else env[match[1]]
    return [re.sub(r"\$\$|\$\{(\w+)\}", one, word) for word in shlex.split(line)]


def _unit_env(name: str) -> dict[str, str]:
    env = {}
    for value in _exec_lines(name, "Environment"):
        key, _, val = value.partition("=")
        env[key] = val
    return env


def _run_start_guard(hostsdir: Path) -> subprocess.CompletedProcess:
    guard = _exec_lines(DNSMASQ, "ExecStartPre")[0]
    env = {**_unit_env(DNSMASQ), "HOSTSDIR": str(hostsdir)}
    return subprocess.run(_expand(guard, env), capture_output=True, text=True, timeout=10,
                          env={**os.environ, **env})


@pytest.mark.parametrize(("files", "starts"), [
    ({}, False),
    ({"unknown_hosts_filter": "*:*:*:*:*:*,ignore\n"}, True),
    ({"unknown_hosts_filter": "*:*:*:*:*:*\n"}, True),  # discovery: unknown MACs served
    ({"unknown_hosts_filter": ""}, False),              # truncated
    ({"unknown_hosts_filter": "52:54:00:12:34:56\n"}, False),
    ({"52:54:00:12:34:56": "52:54:00:12:34:56\n"}, False),
])
def test_dnsmasq_refuses_to_start_without_the_wildcard_rule(tmp_path, files, starts):
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    for name, content in files.items():
        (hostsdir / name).write_text(content)
    result = _run_start_guard(hostsdir)
    assert (result.returncode == 0) is starts, result.stderr
    if not starts:
        assert "refusing to start" in result.stderr


def test_dnsmasq_refuses_to_start_without_the_hostsdir(tmp_path):
    result = _run_start_guard(tmp_path / "missing")
    assert result.returncode != 0
    assert "refusing to start" in result.stderr


def test_dnsmasq_unit_checks_its_configuration_before_starting(tmp_path):
    check_line = shipped.localised(_exec_lines(DNSMASQ, "ExecStartPre")[1])
    good, bad = tmp_path / "good.conf", tmp_path / "bad.conf"
    good.write_text("port=0\ndhcp-range=192.0.2.10,192.0.2.20,10m\n")
    bad.write_text("port=0\nno-such-option\n")
    for path, ok in ((good, True), (bad, False)):
        argv = _expand(check_line, {**_unit_env(DNSMASQ), "DNSMASQ_CONF": str(path)})
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        assert (result.returncode == 0) is ok, result.stderr
    start = _exec_lines(DNSMASQ, "ExecStart")[0]
    assert "--keep-in-foreground" in start and "--conf-file=${DNSMASQ_CONF}" in start
