"""Secrets never shown in clear: stored inventory, node fields a rule wrote, logs."""

import logging

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body, macs_of

SECRET = "hunter2-s3cr3t"


@pytest.fixture
def api(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    api = Api(api_conf(tmp_path, sqlite_url,
                       inspection_rules={"mask_secrets": "sensitive"}))
    yield api
    api.close()


def inspect(api, data):
    node = add_node(api.context.engine, state="inspect wait", macs=macs_of(data)[:1],
                    inspect_interface="agent")
    assert api.unversioned.post("/v1/continue_inspection", json=data).status_code == 202
    api.wait_processed()
    return node["uuid"]


def test_inventory_and_plugin_data_are_masked(api):
    data = body("bios-vm-x86_64")
    data["inventory"]["bmc_password"] = SECRET
    data["inventory"]["extra_info"] = {"ipmi_password": SECRET, "auth_token": SECRET,
                                       "console": f"https://admin:{SECRET}@bmc.example/"}
    data["plugin_items"] = [{"api_key": SECRET}]
    node = inspect(api, data)
    shown = api.client.get(f"/v1/nodes/{node}/inventory")
    assert shown.status_code == 200
    assert SECRET not in shown.get_data(as_text=True)
    assert shown.json["inventory"]["extra_info"]["ipmi_password"] == "******"
    assert shown.json["inventory"]["extra_info"]["console"] == "https://admin:******@bmc.example/"
    assert shown.json["plugin_data"]["plugin_items"] == [{"api_key": "******"}]


def test_a_password_a_rule_copied_into_extra_is_masked(api):
    rule = {"description": "copy the BMC password", "sensitive": True,
            "conditions": [], "actions": [
                {"op": "set-attribute", "args": {"path": "/extra/bmc/password",
                                                 "value": "{inventory[bmc_password]}"}}]}
    assert api.client.post("/v1/inspection_rules", json=rule).status_code == 201
    data = body("bios-vm-x86_64")
    data["inventory"]["bmc_password"] = SECRET
    node = inspect(api, data)
    shown = api.client.get(f"/v1/nodes/{node}")
    assert shown.json["provision_state"] == "manageable", shown.json["last_error"]
    assert shown.json["extra"]["bmc"]["password"] == "******"
    assert SECRET not in shown.get_data(as_text=True)


def test_a_sensitive_rule_s_fail_message_reaches_no_log(api, caplog):
    rule = {"description": "refuse", "sensitive": True, "conditions": [],
            "actions": [{"op": "fail", "args": {"msg": f"bad password {SECRET}"}}]}
    assert api.client.post("/v1/inspection_rules", json=rule).status_code == 201
    with caplog.at_level(logging.DEBUG):
        node = inspect(api, body("bios-vm-x86_64"))
    shown = api.client.get(f"/v1/nodes/{node}").json
    assert shown["provision_state"] == "inspect failed"
    assert SECRET not in (shown["last_error"] or "")
    assert SECRET not in caplog.text
