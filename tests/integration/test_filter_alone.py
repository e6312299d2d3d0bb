"""``pip install ironic-pxe-filter`` without extras gives a filter that runs on its own.

One venv is built for the module from a copy of the source tree (the checkout is left
untouched), with the project's base dependencies only, the way an operator beside an existing
Ironic or a container image for the filter installs it. The web and BMC stack must be absent,
and the filter must still start, sync a real SQLite database and render dnsmasq's file.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support import services
from tests.support.filter_nodes import add_node

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
#: What only the [inspection] extra may bring (distribution names as pip lists them).
INSPECTION_ONLY = ("flask", "waitress", "sushy", "pyghmi", "keystonemiddleware",
                   "oslo.policy", "alembic", "jsonschema", "os-traits", "jsonpatch")
INSTALL_TIMEOUT = 300


@pytest.fixture(scope="module")
def filter_venv(tmp_path_factory) -> Path:
    """A venv with ``pip install <project>`` and nothing else."""
    root = tmp_path_factory.mktemp("filter-alone")
    source = root / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for package in ("pxe_filter", "inspection", "etc/dnsmasq"):
        shutil.copytree(REPO / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    try:
        done = subprocess.run([str(venv / "bin/pip"), "install", "--quiet", str(source)],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"pip install of the filter alone took over {INSTALL_TIMEOUT} s")
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def _run(venv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin/ironic-pxe-filter"), *args], capture_output=True,
                          text=True, timeout=60)


def test_no_inspection_stack_is_installed(filter_venv):
    listed = subprocess.run([str(filter_venv / "bin/pip"), "list", "--format", "json"],
                            capture_output=True, text=True, check=True, timeout=60)
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "ironic-pxe-filter" in installed
    assert not installed & set(INSPECTION_ONLY)


def test_help_and_usage(filter_venv):
    done = _run(filter_venv, "--help")
    assert done.returncode == 0, done.stderr
    assert "[pxe_filter]" in done.stdout and "sync_period" in done.stdout


def test_inspection_commands_name_the_extra(filter_venv):
    for command in ("ironic-inspection", "ironic-inspection-api", "ironic-inspection-worker"):
        done = subprocess.run([str(filter_venv / "bin" / command), "--help"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert "pip install 'ironic-pxe-filter[inspection]'" in done.stderr
        assert "Traceback" not in done.stderr


def test_one_shot_sync_and_render(filter_venv, tmp_path, sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    allowed, denied = "52:54:00:0a:00:01", "52:54:00:0a:00:02"
    add_node(sqlite_url, "inspect wait", [allowed])
    add_node(sqlite_url, "active", [denied])
    hosts = tmp_path / "hosts"
    conf = tmp_path / "filter.conf"
    conf.write_text(f"[database]\nconnection = {sqlite_url}\n"
                    f"[pxe_filter]\ndhcp_hostsdir = {hosts}\nsync_perod = 5\n"
                    "[dnsmasq]\ninterface = lo\n"
                    "dhcp_ranges = 192.0.2.100,192.0.2.200,255.255.255.0\n")

    done = _run(filter_venv, "--config-file", str(conf), "--once")
    assert done.returncode == 0, done.stderr
    assert "First sync: 1 allowed, 1 denied" in done.stderr
    # Without the inspection extra too, a misspelling is named.
    assert f"WARNING pxe_filter: Unknown option [pxe_filter]sync_perod in {conf}: ignored, " \
           "fix or remove it (did you mean sync_period?)" in done.stderr
    assert (hosts / allowed).read_text() == f"{allowed}\n"
    assert (hosts / denied).read_text() == f"{denied},ignore\n"

    if shutil.which("dnsmasq") is None:
        services.unavailable("dnsmasq", "render-dnsmasq-config checks its output with dnsmasq "
                                        "(Debian: dnsmasq-base)")
    rendered = _run(filter_venv, "render-dnsmasq-config", "--config-file", str(conf),
                    "--output", "-")
    assert rendered.returncode == 0, rendered.stderr
    assert f"dhcp-hostsdir={hosts}" in rendered.stdout.splitlines()
