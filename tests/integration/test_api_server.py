"""The real ``ironic-inspection-api`` process under waitress on 127.0.0.1."""

import pathlib
import subprocess
import time

import pytest
import requests

from inspection.api.auth import BasicAuth, HtpasswdError, parse_htpasswd
from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import (
    PASSWORD,
    USER,
    basic,
    error_message,
    write_htpasswd,
)
from tests.integration.pipeline_support import body
from tests.support.processes import write_config
from tests.support.services_procs import API_HEADERS, console_script, free_port, start_api


@pytest.fixture
def db(sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    return sqlite_url


def test_serves_with_basic_auth_and_processes_in_process(tmp_path, db):
    htpasswd = write_htpasswd(tmp_path / "htpasswd", {USER: PASSWORD})
    api = start_api(tmp_path, db, extra_conf={
        "api": {"auth_strategy": "http_basic", "http_basic_auth_user_file": htpasswd,
                "max_request_body_size": 65536},
        "auto_discovery": {"enabled": True}})
    try:
        api.wait_ready()
        url, auth = api.url, (USER, PASSWORD)
        denied = requests.get(f"{url}/v1/nodes", timeout=5)
        assert denied.status_code == 401 and "Basic" in denied.headers["WWW-Authenticate"]
        assert error_message(denied) == "Authentication required"
        assert requests.get(f"{url}/v1/nodes", auth=auth, timeout=5).json() == {"nodes": []}
        assert requests.get(f"{url}/v1/openapi.json", timeout=5).status_code == 200

        resp = requests.post(f"{url}/v1/continue_inspection", json=body("bios-vm-x86_64"),
                             timeout=10)
        assert resp.status_code == 202, resp.text
        node_uuid = resp.json()["uuid"]
        deadline = time.monotonic() + 20
        while True:
            stored = requests.get(f"{url}/v1/nodes/{node_uuid}/inventory", auth=auth,
                                  headers=API_HEADERS, timeout=5)
            if stored.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert stored.status_code == 200, api.log_text()
        node = requests.get(f"{url}/v1/nodes/{node_uuid}", auth=auth, timeout=5).json()
        assert node["auto_discovered"] is True

        huge = requests.post(f"{url}/v1/continue_inspection", data=b"x" * 100_000,
                             headers={"Content-Type": "application/json"}, timeout=10)
        assert huge.status_code == 413 and error_message(huge)
        missing = requests.get(f"{url}/no/such/page", auth=auth, timeout=5)
        assert missing.status_code == 404 and error_message(missing)
    finally:
        assert api.stop() == 0
    assert "Traceback" not in api.log_text()


def run_api(tmp_path, sections, timeout=30):
    config = write_config(tmp_path / "api.conf", sections)
    argv = [*console_script("ironic-inspection-api", "inspection.api.cmd"),
            "--config-file", str(config)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def base(db_url, **api):
    return {"database": {"connection": db_url},
            "api": {"host_ip": "127.0.0.1", "port": free_port(), "auth_strategy": "noauth",
                    **api}}


def assert_one_line_error(proc, code, words):
    assert proc.returncode == code, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "CRITICAL" in lines[0] and words in lines[0]
    assert "Traceback" not in proc.stderr


def test_startup_errors(tmp_path, db):
    bad_hash = tmp_path / "htpasswd"
    bad_hash.write_text("admin:plain-text-password\n")
    assert_one_line_error(run_api(tmp_path, base(
        db, auth_strategy="http_basic", http_basic_auth_user_file=str(bad_hash))), 2,
        "bcrypt")
    assert_one_line_error(run_api(tmp_path, base(
        db, auth_strategy="http_basic", http_basic_auth_user_file=str(tmp_path / "none"))),
        2, "cannot read")
    assert_one_line_error(run_api(tmp_path, base(db, host_ip="0.0.0.0")), 2,
                          "allow_insecure_noauth")
    assert_one_line_error(run_api(tmp_path, base(db, port="not-a-port")), 2, "port")
    assert_one_line_error(run_api(tmp_path, base(db, auth_strategy="keystone")), 2,
                          "[keystone_authtoken] www_authenticate_uri and auth_type")
    rules = tmp_path / "rules.yaml"
    rules.write_text("- actions: [{op: no-such-op}]\n")
    sections = base(db)
    sections["inspection_rules"] = {"built_in_rules": str(rules)}
    assert_one_line_error(run_api(tmp_path, sections), 2, "no-such-op")
    missing = f"sqlite:///{tmp_path}/state/missing.sqlite"
    assert_one_line_error(run_api(tmp_path, base(missing)), 2, "ironic-inspection dbsync")
    assert not (tmp_path / "state").exists()
    (tmp_path / "empty.sqlite").touch()  # a database without the schema
    empty = f"sqlite:///{tmp_path}/empty.sqlite"
    assert_one_line_error(run_api(tmp_path, base(empty)), 1, "dbsync")
    dead = "postgresql+psycopg2://postgres@127.0.0.1:1/nothing"
    assert_one_line_error(run_api(tmp_path, base(dead)), 1, "cannot connect")


ETC = pathlib.Path(__file__).parents[2] / "etc" / "ironic-inspection"


def test_shipped_configuration_works(tmp_path, db):
    port = free_port()
    override = write_config(tmp_path / "override.conf", {
        "database": {"connection": db}, "api": {"port": port}})
    argv = [*console_script("ironic-inspection-api", "inspection.api.cmd"),
            "--config-file", str(ETC / "shared.conf"), "--config-file",
            str(ETC / "ironic-inspection.conf"), "--config-file", str(override)]
    log = tmp_path / "api.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                resp = requests.get(f"http://127.0.0.1:{port}/v1/nodes", timeout=2)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        assert resp.status_code == 200 and resp.json() == {"nodes": []}
    finally:
        proc.terminate()
        assert proc.wait(15) == 0


def test_htpasswd_sample_is_accurate(tmp_path):
    sample = (ETC / "htpasswd.sample").read_text()
    with pytest.raises(HtpasswdError, match="no user"):
        parse_htpasswd(str(ETC / "htpasswd.sample"))  # as shipped: nobody can log in
    enabled = tmp_path / "htpasswd"
    enabled.write_text(sample.replace("#admin:", "admin:"))
    checker = BasicAuth(str(enabled))
    assert checker.check(basic("admin", "changeme")["Authorization"]) == "admin"
    assert checker.check(basic("admin", "other")["Authorization"]) is None
