"""``GET /metrics`` of a real ``ironic-inspection-api`` process, as Prometheus scrapes it."""

import requests

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import PASSWORD, USER, write_htpasswd
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body, macs_of
from tests.support.metrics import scrape, value, wait_for
from tests.support.services_procs import API_HEADERS, start_api

RULE = {"description": "metrics test", "phase": "main",
        "conditions": [{"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}",
                                              "x86_64"]}}],
        "actions": [{"op": "set-attribute", "args": {"path": "/extra/seen", "value": True}}]}


def callbacks(samples, outcome):
    return value(samples, "ironic_inspection_callbacks_total", outcome=outcome)


def test_metrics_need_admin_login_and_count_callbacks_lookups_processing(tmp_path,
                                                                           sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    data = body("bios-vm-x86_64")
    add_node(engine, "inspect wait", macs=macs_of(data)[:1])
    engine.dispose()
    htpasswd = write_htpasswd(tmp_path / "htpasswd", {USER: PASSWORD})
    api = start_api(tmp_path, sqlite_url, extra_conf={
        "api": {"auth_strategy": "http_basic", "http_basic_auth_user_file": htpasswd},
        "auto_discovery": {"enabled": False}})
    auth = (USER, PASSWORD)
    try:
        api.wait_ready()
        url = f"{api.url}/metrics"
        refused = requests.get(url, timeout=5)
        assert refused.status_code == 401, refused.text
        assert "ironic_inspection" not in refused.text
        assert requests.get(url, auth=(USER, "wrong"), timeout=5).status_code == 401
        before = scrape(url, auth)
        for outcome in ("accepted", "discovered", "not_found", "bad_request", "unavailable",
                        "error"):
            assert callbacks(before, outcome) == 0, outcome
        assert value(before, "ironic_inspection_nodes", provision_state="inspect wait") == 1
        assert value(before, "ironic_inspection_processing_backlog") == 0
        assert value(before, "ironic_inspection_processed_total", outcome="finished") == 0

        created = requests.post(f"{api.url}/v1/inspection_rules", json=RULE, auth=auth,
                                headers=API_HEADERS, timeout=5)
        assert created.status_code == 201, created.text

        unknown = {"inventory": {"interfaces": [{"name": "eth0",
                                                 "mac_address": "52:54:00:aa:bb:cc"}]}}
        resp = requests.post(f"{api.url}/v1/continue_inspection", json=unknown, timeout=5)
        assert resp.status_code == 404
        resp = requests.post(f"{api.url}/v1/continue_inspection", json={"no": "inventory"},
                             timeout=5)
        assert resp.status_code == 400
        after = scrape(url, auth)
        assert callbacks(after, "not_found") == 1
        assert callbacks(after, "bad_request") == 1
        assert callbacks(after, "accepted") == 0

        resp = requests.post(f"{api.url}/v1/continue_inspection", json=data, timeout=10)
        assert resp.status_code == 202, resp.text
        # The duration is observed last, when processing returns.
        done = wait_for(url, lambda s: value(
            s, "ironic_inspection_processing_duration_seconds_count") == 1, timeout=20,
            auth=auth)
        assert value(done, "ironic_inspection_processed_total", outcome="finished") == 1
        assert callbacks(done, "accepted") == 1
        assert value(done, "ironic_inspection_lookups_total", method="mac") == 1
        assert value(done, "ironic_inspection_lookups_total", method="bmc") == 0
        assert value(done, "ironic_inspection_processing_duration_seconds_sum") > 0
        assert value(done, "ironic_inspection_rules_evaluated_total", phase="main") == 1
        assert value(done, "ironic_inspection_rules_matched_total", phase="main") == 1
        assert value(done, "ironic_inspection_nodes", provision_state="manageable") == 1
        assert value(done, "ironic_inspection_processing_in_progress") == 0
    finally:
        assert api.stop() == 0
    assert "Traceback" not in api.log_text()


def test_discovered_callbacks_are_counted_apart(tmp_path, sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    api = start_api(tmp_path, sqlite_url, extra_conf={"auto_discovery": {"enabled": True}})
    try:
        api.wait_ready()
        resp = requests.post(f"{api.url}/v1/continue_inspection", json=body("bios-vm-x86_64"),
                             timeout=10)
        assert resp.status_code == 202, resp.text
        samples = wait_for(f"{api.url}/metrics", lambda s: value(
            s, "ironic_inspection_processing_duration_seconds_count") == 1, timeout=20)
        assert value(samples, "ironic_inspection_processed_total", outcome="finished") == 1
        assert callbacks(samples, "discovered") == 1
        assert callbacks(samples, "accepted") == 0
        assert value(samples, "ironic_inspection_nodes", provision_state="enroll") == 1
    finally:
        assert api.stop() == 0
