"""What the API refuses, a real ironic-inspection-api process on SQLite answers in Ironic's
JSON body and, for the ramdisk callback, logs in one line with the client address, the status
and the reason."""

import re

import pytest
import requests

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import error_message
from tests.integration.pipeline_support import body
from tests.support.services_procs import API_HEADERS, start_api

BODY_LIMIT = 65536  # [api]max_request_body_size; waitress refuses beyond 4 times that


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rejections")
    url = f"sqlite:///{tmp}/inspection.sqlite"
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    proc = start_api(tmp, url, extra_conf={"api": {"max_request_body_size": BODY_LIMIT}})
    proc.wait_ready()
    yield proc
    assert proc.stop() == 0
    assert "Traceback" not in proc.log_text()


def _post(api, data: bytes | str | None = None, json=None, **query):
    return requests.post(f"{api.url}/v1/continue_inspection", data=data, json=json,
                         params=query, timeout=10,
                         headers={"Content-Type": "application/json"})


def _rejection_lines(log: str) -> list[str]:
    return re.findall(r"WARNING inspection\.api\.continue\b.*Ramdisk callback from .*", log)


def test_every_rejected_callback_leaves_one_line(api):
    no_mac = body("bios-vm-x86_64")
    for interface in no_mac["inventory"]["interfaces"]:
        interface["mac_address"] = "not-a-mac"
    before = len(_rejection_lines(api.log_text()))
    cases = [
        (_post(api, data="{not json"), 400),
        (_post(api, json={"no": "inventory"}), 400),
        (_post(api, json=no_mac), 400),
    ]
    lines = []
    for response, status in cases:
        assert response.status_code == status, response.text
        reason = error_message(response)
        log = api.wait_log(f"rejected with {status}: {reason}", timeout=5)
        lines = _rejection_lines(log)
    assert len(lines) == before + len(cases), log
    for line in lines[before:]:
        assert "] Ramdisk callback from 127.0.0.1 rejected with 400: " in line
        assert line.endswith("Check the ramdisk's version and what it sends "
                             "(docs/troubleshooting.md)")


def test_a_body_over_waitress_limit_gets_json_413_and_a_line(api):
    response = _post(api, data=b" " * (BODY_LIMIT * 4 + 1))
    assert response.status_code == 413
    assert response.headers["Content-Type"] == "application/json"
    assert error_message(response).startswith("The request body is too large")
    api.wait_log("Ramdisk callback from 127.0.0.1 rejected with 413: The request body is "
                 "too large", timeout=5)


def test_unserved_provision_targets_get_501(api):
    created = requests.post(f"{api.url}/v1/nodes", json={"driver": "fake-hardware"},
                            headers=API_HEADERS, timeout=10)
    assert created.status_code == 201, created.text
    node = created.json()["uuid"]
    for target in ("provide", "deploy"):
        response = requests.put(f"{api.url}/v1/nodes/{node}/states/provision",
                                json={"target": target}, headers=API_HEADERS, timeout=10)
        assert response.status_code == 501
        message = error_message(response)
        assert f"Provision target '{target}' is not available through this service" in message
        assert "Use a full Ironic deployment" in message
    unknown = requests.put(f"{api.url}/v1/nodes/{node}/states/provision",
                           json={"target": "frobnicate"}, headers=API_HEADERS, timeout=10)
    assert unknown.status_code == 400
