"""Rules cannot amplify ramdisk data without bound: loops, written bytes and time are limited,
and going past a limit fails that inspection with a clear last_error, never the process."""

import time

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body, macs_of


@pytest.fixture
def api(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    api = Api(api_conf(tmp_path, sqlite_url, api={"max_request_body_size": 32 * 1024 * 1024}))
    yield api
    api.close()


def add_rule(api, phase, **parts):
    rule = {"description": "amplifier", "phase": phase, "conditions": [], "actions": [],
            **parts}
    resp = api.client.post("/v1/inspection_rules", json=rule)
    assert resp.status_code == 201, resp.json


def run(api, data):
    node = add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1],
                    inspect_interface="agent")
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
    api.wait_processed(120)
    return resp, api.client.get(f"/v1/nodes/{node['uuid']}").json


def test_a_looping_extend_over_a_4mb_callback_fails_the_inspection(api):
    add_rule(api, "main", actions=[{"op": "extend-attribute", "loop": "{inventory[blob]}",
                                    "args": {"path": "/extra/copies", "value": "{item}"}}])
    data = body("bios-vm-x86_64")
    data["inventory"]["blob"] = ["x" * 100] * 40_000  # 4 MB
    resp, node = run(api, data)
    assert resp.status_code == 202
    assert node["provision_state"] == "inspect failed"
    assert "max_loop_items = 10000" in node["last_error"]
    assert "copies" not in node["extra"]


def test_many_small_writes_stop_at_the_node_size_limit(api):
    add_rule(api, "main", actions=[{"op": "extend-attribute", "loop": "{inventory[blob]}",
                                    "args": {"path": "/extra/copies", "value": "{item}"}}])
    data = body("bios-vm-x86_64")
    data["inventory"]["blob"] = ["y" * 1000] * 5000  # under the loop limit, 5 MB written
    _, node = run(api, data)
    assert node["provision_state"] == "inspect failed"
    assert "max_node_size" in node["last_error"]
    assert "copies" not in node["extra"]


def test_an_early_loop_over_a_million_items_is_refused_quickly(api):
    add_rule(api, "early", conditions=[{"op": "eq", "loop": "{inventory[numbers]}",
                                        "args": ["{item}", -1], "multiple": "all"}],
             actions=[{"op": "fail", "args": {"msg": "never"}}])
    data = body("bios-vm-x86_64")
    data["inventory"]["numbers"] = list(range(1_000_000))
    add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1],
             inspect_interface="agent")
    start = time.monotonic()
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
    elapsed = time.monotonic() - start
    assert resp.status_code == 400, resp.json  # the data was rejected by the rules
    # Before: 9 s of an API thread on an unauthenticated request. Most of what is left is
    # parsing the 7 MB body.
    assert elapsed < 5, elapsed
