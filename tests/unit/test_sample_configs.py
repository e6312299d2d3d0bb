"""The samples in etc/ are oslo-config-generator's output for the code as it is."""

import configparser
import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from inspection import conf as inspection_conf
from pxe_filter import conf as filter_conf

REPO = Path(__file__).resolve().parents[2]
GENERATORS = sorted(REPO.glob("etc/*/*-config-generator.conf"))


def _generate(generator: Path, output: Path) -> subprocess.CompletedProcess:
    tool = Path(sys.executable).with_name("oslo-config-generator")
    # A child process: oslo.messaging's option listing imports eventlet.
    return subprocess.run([str(tool), "--config-file", str(generator), "--output-file",
                           str(output)], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_both_namespaces_have_a_generator_config():
    assert [g.name for g in GENERATORS] == ["ironic-inspection-config-generator.conf",
                                            "ironic-pxe-filter-config-generator.conf"]


@pytest.mark.parametrize("generator", GENERATORS, ids=lambda g: g.parent.name)
def test_checked_in_sample_is_up_to_date(generator, tmp_path):
    parser = configparser.ConfigParser(strict=False)
    parser.read(generator)
    sample = REPO / parser["DEFAULT"]["output_file"]
    fresh = tmp_path / sample.name
    proc = _generate(generator, fresh)
    assert proc.returncode == 0, proc.stderr
    diff = list(difflib.unified_diff(sample.read_text().splitlines(),
                                     fresh.read_text().splitlines(), str(sample), "generated",
                                     lineterm="", n=1))
    assert not diff, ("stale sample: run scripts/genconfig and commit the result\n"
                      + "\n".join(diff[:40]))


def _sample_options(path: Path, commented_only: bool = True) -> set[tuple[str, str]]:
    found, section = set(), None
    pattern = r"#(\w+) =.*" if commented_only else r"#?(\w+) =.*"
    for line in path.read_text().splitlines():
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif match := re.fullmatch(pattern, line):
            found.add((section, match[1]))
    return found


@pytest.mark.parametrize(("sample", "list_opts"), [
    ("etc/ironic-pxe-filter/ironic-pxe-filter.conf", filter_conf.list_sample_opts),
    ("etc/ironic-inspection/ironic-inspection.conf", inspection_conf.list_opts),
])
def test_sample_documents_every_option_of_its_service(sample, list_opts):
    """Guards the generator configuration itself (e.g. a namespace dropped from it)."""
    expected = {(group or "DEFAULT", opt.dest) for group, opts in list_opts() for opt in opts}
    found = _sample_options(REPO / sample)
    assert expected - found == set()
    assert ("DEFAULT", "log_file") in found and ("DEFAULT", "transport_url") in found


def test_shared_file_sets_only_options_that_both_services_read():
    shared = _sample_options(REPO / "etc/ironic-inspection/shared.conf", commented_only=False)
    assert ("database", "connection") in shared and ("auto_discovery", "enabled") in shared
    for sample in ("etc/ironic-pxe-filter/ironic-pxe-filter.conf",
                   "etc/ironic-inspection/ironic-inspection.conf"):
        assert shared <= _sample_options(REPO / sample), sample


def test_policy_sample_is_up_to_date(tmp_path):
    generator = REPO / "etc/ironic-inspection/ironic-inspection-policy-generator.conf"
    sample = REPO / "etc/ironic-inspection/policy.yaml.sample"
    fresh = tmp_path / sample.name
    tool = Path(sys.executable).with_name("oslopolicy-sample-generator")
    proc = subprocess.run([str(tool), "--config-file", str(generator), "--output-file",
                           str(fresh)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert sample.read_text() == fresh.read_text(), "stale policy sample: run scripts/genconfig"
    assert '#"baremetal:node:traits:list":' in fresh.read_text()


def test_policy_tools_see_the_configured_policy_file(tmp_path):
    """The ``oslo.policy.enforcer`` entry point reads the service's --config-file."""
    (tmp_path / "policy.yaml").write_text('"baremetal:node:create": "role:reader"\n')
    (tmp_path / "api.conf").write_text(f"[oslo_policy]\npolicy_file = {tmp_path}/policy.yaml\n")
    tool = Path(sys.executable).with_name("oslopolicy-policy-generator")
    proc = subprocess.run([str(tool), "--namespace", "ironic-inspection", "--config-file",
                           str(tmp_path / "api.conf")], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    effective = proc.stdout.splitlines()
    assert '"baremetal:node:create": "role:reader"' in effective
    assert '"baremetal:node:delete": "role:admin and system_scope:all"' in effective
