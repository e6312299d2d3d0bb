"""``ironic-inspection rule test`` and ``node reprocess`` against a real API process (SQLite,
auto-discovery on): what an operator types and reads."""

import json
import time

import pytest
import requests

from inspection.cli import main
from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.test_fleet import NIC_A, NIC_C, machine
from tests.support.services_procs import API_HEADERS, start_api

RULE = {"description": "rack R640s", "conditions": [
    {"op": "eq", "args": ["{inventory[system_vendor][product_name]}", "PowerEdge R640"]}],
    "actions": [{"op": "set-attribute", "args": ["/properties/rack", "r12"]}]}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli-fleet")
    url = f"sqlite:///{tmp}/inspection.sqlite"
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    proc = start_api(tmp, url, extra_conf={"auto_discovery": {"enabled": "true"},
                                           "inspector": {"add_ports": "pxe"}})
    try:
        proc.wait_http()
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_text()


def discovered(api, data) -> str:
    """Post a ramdisk callback; the node's UUID once its data is processed."""
    resp = requests.post(f"{api.url}/v1/continue_inspection", json=data, timeout=10)
    assert resp.status_code == 202, resp.text
    node = resp.json()["uuid"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        shown = requests.get(f"{api.url}/v1/nodes/{node}", headers=API_HEADERS,
                             timeout=10).json()
        if shown["inspection_finished_at"]:
            return node
        time.sleep(0.2)
    raise AssertionError(f"node {node} was not processed")


@pytest.fixture
def cli(api, capsys, monkeypatch):
    """run(*argv) -> (exit status, stdout, stderr)."""
    monkeypatch.setenv("IRONIC_INSPECTION_URL", api.url)

    def run(*argv):
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err
    return run


def test_rule_test_shows_matches_and_changes_and_creates_nothing(api, cli, tmp_path):
    r640 = discovered(api, machine(NIC_A))
    r650 = discovered(api, machine(NIC_C, serial="ZZ9", product_name="PowerEdge R650"))
    rule_file = tmp_path / "rack.yaml"
    rule_file.write_text("- description: rack R640s\n"
                         "  conditions: [{op: eq, args: ['{inventory[system_vendor]"
                         "[product_name]}', PowerEdge R640]}]\n"
                         "  actions: [{op: set-attribute, args: [/properties/rack, r12]}]\n")
    code, out, err = cli("rule", "test", str(rule_file), "--node", r640, "--node", r650,
                         "-f", "json")
    assert code == 0, err
    assert json.loads(out) == [
        {"node": r640, "matched": True,
         "changes": [{"path": "/properties/rack", "old": None, "new": "r12"}]},
        {"node": r650, "matched": False, "changes": []}]
    code, out, err = cli("rule", "test", str(rule_file))  # every node with stored data
    assert code == 0, err
    assert '/properties/rack: null -> "r12"' in out
    assert "1 of 2 node(s) matched; nothing was changed." in out
    assert cli("rule", "list", "-f", "json")[1].strip() == "[]"
    shown = requests.get(f"{api.url}/v1/nodes/{r640}", timeout=10).json()
    assert "rack" not in shown["properties"]

    rule_file.write_text("actions: [{op: no-such-action}]\n")
    code, out, err = cli("rule", "test", str(rule_file), "--node", r640)
    assert code == 1 and "rule 1" in err and "\n" not in err.strip()


def test_node_reprocess_applies_a_new_rule_and_keeps_the_state(api, cli):
    node = discovered(api, machine("aa:00:00:00:00:0d", serial="RP1"))
    assert cli("node", "manage", node)[0] == 0
    code, _, err = cli("rule", "create", "--actions", json.dumps(RULE["actions"]),
                       "--conditions", json.dumps(RULE["conditions"]))
    assert code == 0, err
    try:
        code, out, err = cli("node", "reprocess", node)
        assert code == 0, err
        assert out.splitlines() == [
            f"Node {node} reprocessed (1 change(s)); it stays 'manageable'.",
            '  /properties/rack: null -> "r12"']
        shown = requests.get(f"{api.url}/v1/nodes/{node}", headers=API_HEADERS,
                             timeout=10).json()
        assert shown["properties"]["rack"] == "r12"
        assert shown["provision_state"] == "manageable"
    finally:
        cli("rule", "delete", "--all")
    assert cli("node", "inspect", node)[0] == 0
    code, _, err = cli("node", "reprocess", node)
    assert code == 1 and "'inspect wait'" in err and "(HTTP 409)" in err
