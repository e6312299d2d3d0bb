"""Judged by Ironic's own API tests: tempest with ironic-tempest-plugin against the API.

A real Keystone (enforced scope, new defaults) holds the API in its catalog; tempest, from a
venv of its own (``venvs.TEMPEST``), makes its users with dynamic credentials and runs the
plugin's admin and RBAC API tests twice: as upstream configures it (a test with no version of
its own sends no version header, and is served as 1.1) and with microversions 1.1 to 1.96
configured (every test names its version). The tests that cannot pass are listed, each with
its reason, in ``tempest_expected_failures.txt``, the same list for both runs; any other
failure fails this test, and so does a listed test that passes (the list must shrink with
the API).
"""

import csv
import io
import os
import re
import subprocess
from pathlib import Path

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support import venvs
from tests.support.identity import REGION, Keystone
from tests.support.processes import write_config
from tests.support.services_procs import free_port, start_api

pytestmark = pytest.mark.slow

EXPECTED = Path(__file__).with_name("tempest_expected_failures.txt")
SERVICE_PASSWORD = "inspection-service-pass"
#: The plugin's API tests: admin (every resource) and RBAC (the personas' defaults).
TESTS = r"^ironic_tempest_plugin\.tests\.api\.(admin|rbac_defaults)\."
#: Two workers on two cores.
CONCURRENCY = 2
RUN_TIMEOUT = 900
WAITS = ("deploywait_timeout", "active_timeout", "association_timeout", "inspect_timeout",
         "power_timeout", "unprovision_timeout", "rescue_timeout", "unrescue_timeout")
#: The unmodified suite passes at least this many tests (issue 33's bar).
MIN_PASSED = 200
#: ``[baremetal]`` microversion options: none (upstream's defaults: no minimum, maximum
#: ``latest``), or the range this API serves, which makes every test name a version.
MICROVERSIONS = {"upstream-default": {},
                 "min-1.1": {"min_microversion": "1.1", "max_microversion": "1.96"}}


def expected_failures() -> tuple[dict[str, str], list[str]]:
    """``test id -> reason`` from the checked-in list, and the modules and classes it says
    not to run (``skip <prefix>  # reason``)."""
    listed, skipped = {}, []
    for line in EXPECTED.read_text().splitlines():
        test, _, reason = line.partition("#")
        test = test.strip()
        if test:
            assert reason.strip(), f"no reason given for {test}"
            if test.startswith("skip "):
                skipped.append(test.removeprefix("skip ").strip())
            else:
                listed[test] = reason.strip()
    return listed, skipped


def _tempest_conf(path: Path, keystone: Keystone, microversions: dict[str, str]) -> None:
    write_config(path, {
        "DEFAULT": {"log_file": str(path.parent / "tempest.log")},
        "auth": {"use_dynamic_credentials": True, "admin_username": "admin",
                 "admin_password": keystone.admin_password, "admin_project_name": "admin",
                 "admin_domain_name": "Default", "admin_system": "all"},
        "identity": {"uri_v3": keystone.auth_url, "auth_version": "v3", "region": REGION,
                     "disable_ssl_certificate_validation": True},
        "identity-feature-enabled": {"api_v2": False},
        "service_available": {"ironic": True, "neutron": False, "nova": False,
                              "glance": False, "cinder": False, "swift": False},
        "enforce_scope": {"ironic": True},
        # Short waits: a state this service never reaches (deploy, cleaning) fails in
        # seconds instead of Ironic's five minutes.
        "baremetal": {"driver": "fake-hardware", **microversions,
                      **dict.fromkeys(WAITS, 10)},
    })


def _results(workspace: Path, bindir: Path) -> dict[str, str]:
    """``test id (without its tags) -> status`` of the last run."""
    stream = subprocess.run([str(bindir / "stestr"), "last", "--subunit"], cwd=workspace,
                            capture_output=True, check=True, timeout=120).stdout
    # subunit2csv exits 1 when the stream holds a failure: its output is what counts
    table = subprocess.run([str(bindir / "subunit2csv"), "--no-passthrough"], input=stream,
                           capture_output=True, timeout=120).stdout.decode()
    results = {}
    for row in csv.DictReader(io.StringIO(table)):
        test = re.sub(r"\[.*\]$", "", row["test"])
        if test.startswith("ironic_tempest_plugin."):
            results[test] = row["status"]
    return results


@pytest.mark.parametrize("microversions", list(MICROVERSIONS))
def test_tempest_api_suite_passes_under_keystone(tmp_path_factory, microversions):
    listed, skipped = expected_failures()
    bindir = venvs.ensure_venv("tempest", venvs.TEMPEST)
    clients_bin = venvs.ensure_venv("clients", venvs.CLIENTS)
    keystone = Keystone(tmp_path_factory.mktemp("keystone"))
    api = None
    try:
        keystone.start()
        port = free_port()
        workdir = tmp_path_factory.mktemp("api")
        db = f"sqlite:///{workdir}/inspection.sqlite"
        engine = create_engine(db)
        migration.upgrade(engine)
        engine.dispose()
        api = start_api(workdir, db, port=port, extra_conf={
            "api": {"auth_strategy": "keystone"},
            "keystone_authtoken": {
                "auth_type": "password", "auth_url": keystone.auth_url,
                "www_authenticate_uri": keystone.auth_url, "username": "inspection",
                "password": SERVICE_PASSWORD, "user_domain_id": "default",
                "project_name": "service", "project_domain_id": "default",
                "region_name": REGION}})
        keystone.setup(clients_bin, {
            "projects": ["service"],
            "users": [{"name": "inspection", "password": SERVICE_PASSWORD,
                       "project": "service", "roles": ["service"]}],
            "services": [{"type": "baremetal", "name": "ironic-inspection",
                          "url": f"http://127.0.0.1:{port}"}]})
        api.wait_ready()
        home = tmp_path_factory.mktemp("tempest-home")
        workspace = home / "workspace"
        env = {**os.environ, "HOME": str(home), "PYTHONWARNINGS": "ignore"}
        subprocess.run([str(bindir / "tempest"), "init", str(workspace)], env=env,
                       check=True, capture_output=True, timeout=120)
        _tempest_conf(workspace / "etc" / "tempest.conf", keystone,
                      MICROVERSIONS[microversions])
        excluded = "^(" + "|".join(re.escape(prefix) + r"\b" for prefix in skipped) + ")"
        run = subprocess.run([str(bindir / "tempest"), "run", "--regex", TESTS,
                              "--exclude-regex", excluded, "--concurrency", str(CONCURRENCY)],
                             cwd=workspace, env=env, capture_output=True, text=True,
                             timeout=RUN_TIMEOUT)
        results = _results(workspace, bindir)
    finally:
        stopped = api.stop() if api is not None else 0
        keystone.stop()
    assert results, run.stdout[-3000:] + run.stderr[-3000:]
    failed = {t for t, status in results.items() if status in ("fail", "failure")}
    # the run's failures, for updating the list when the API changes
    (home / "failed.txt").write_text("".join(f"{t}\n" for t in sorted(failed)))
    passed = {t for t, status in results.items() if status == "success"}
    unexpected = sorted(failed - listed.keys())
    assert not unexpected, ("tempest tests failed that are not in "
                            f"{EXPECTED.name}:\n" + "\n".join(unexpected)
                            + "\n" + run.stdout[-5000:])
    fixed = sorted(passed & listed.keys())
    assert not fixed, f"listed in {EXPECTED.name} but passing now:\n" + "\n".join(fixed)
    assert len(passed) >= MIN_PASSED, (len(passed), len(failed))
    assert stopped == 0 and "Traceback" not in api.log_text(), api.log_text()[-5000:]
