"""/v1/inspection_rules against real databases: CRUD, filters, PATCH, sensitivity, explain."""

import uuid

import pytest

from tests.integration.api_helpers import Api, api_conf, error_message, fault
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body

SET_EXTRA = {"op": "set-attribute", "args": {"path": "/extra/checked", "value": True}}
BUILT_IN = """
- description: built-in one
  priority: -5
  actions:
    - op: set-attribute
      args: {path: /extra/builtin, value: yes}
"""


@pytest.fixture
def api(tmp_path, db_url):
    rules_file = tmp_path / "built-in.yaml"
    rules_file.write_text(BUILT_IN)
    api = Api(api_conf(tmp_path, db_url,
                       inspection_rules={"built_in_rules": str(rules_file)}))
    yield api
    api.close()


def create(api, **doc):
    doc.setdefault("actions", [SET_EXTRA])
    resp = api.client.post("/v1/inspection_rules", json=doc)
    assert resp.status_code == 201, resp.json
    return resp


def test_create_show_list_delete(api):
    resp = create(api, description="first", priority=10, scope="rack1")
    rule = resp.json
    assert resp.headers["Location"] == f"http://localhost/v1/inspection_rules/{rule['uuid']}"
    shown = api.client.get(resp.headers["Location"]).json
    assert shown["description"] == "first" and shown["actions"] == [SET_EXTRA]
    assert shown["built_in"] is False and shown["scope"] == "rack1"

    listed = api.client.get("/v1/inspection_rules").json["inspection_rules"]
    assert [r["description"] for r in listed] == ["first", "built-in one"]  # run order
    assert [r["built_in"] for r in listed] == [False, True]
    assert "actions" not in listed[0]
    detailed = api.client.get("/v1/inspection_rules?detail=true").json["inspection_rules"]
    assert detailed[0]["actions"] == [SET_EXTRA]

    assert api.client.delete(resp.headers["Location"]).status_code == 204
    assert api.client.get(resp.headers["Location"]).status_code == 404
    listed = api.client.get("/v1/inspection_rules").json["inspection_rules"]
    assert [r["description"] for r in listed] == ["built-in one"]


def test_filters(api):
    create(api, description="a", scope="rack1")
    create(api, description="b", scope="rack2", phase="preprocess")
    create(api, description="c", phase="early",
           actions=[{"op": "set-plugin-data", "args": {"path": "/x", "value": 1}}])

    def names(query):
        resp = api.client.get(f"/v1/inspection_rules?{query}")
        assert resp.status_code == 200, resp.json
        return sorted(r["description"] for r in resp.json["inspection_rules"])

    assert names("scope=rack1") == ["a"]
    assert names("phase=preprocess") == ["b"]
    assert names("phase=early") == ["c"]
    assert names("phase=main") == ["a", "built-in one"]
    assert names("scope=rack2&phase=main") == []
    bad = api.client.get("/v1/inspection_rules?phase=late")
    assert bad.status_code == 400 and "phase" in error_message(bad)
    assert api.client.get("/v1/inspection_rules?detail=maybe").status_code == 400


def test_invalid_rule_lists_every_problem(api):
    resp = api.client.post("/v1/inspection_rules", json={
        "priority": 10000, "phase": "sometime",
        "actions": [{"op": "no-such-action", "args": {}}]})
    assert resp.status_code == 400
    problems = fault(resp)["problems"]
    joined = " ".join(problems)
    assert len(problems) >= 3
    assert "priority" in joined and "phase" in joined and "no-such-action" in joined
    missing = api.client.post("/v1/inspection_rules", json={"description": "no actions"})
    assert missing.status_code == 400 and "actions" in error_message(missing)
    assert api.client.get("/v1/inspection_rules").json["inspection_rules"][0]["built_in"]
    assert len(api.client.get("/v1/inspection_rules").json["inspection_rules"]) == 1


def test_duplicate_uuid_conflicts(api):
    rule_uuid = str(uuid.uuid4())
    create(api, uuid=rule_uuid)
    again = api.client.post("/v1/inspection_rules", json={"uuid": rule_uuid,
                                                            "actions": [SET_EXTRA]})
    assert again.status_code == 409


def test_built_in_rules_cannot_change(api):
    built_in = api.client.get("/v1/inspection_rules").json["inspection_rules"][0]
    path = f"/v1/inspection_rules/{built_in['uuid']}"
    assert api.client.get(path).json["priority"] == -5
    deleted = api.client.delete(path)
    assert deleted.status_code == 400 and "built in" in error_message(deleted)
    patched = api.client.patch(path, json=[{"op": "replace", "path": "/priority",
                                            "value": 1}])
    assert patched.status_code == 400
    create(api, description="user")
    assert api.client.delete("/v1/inspection_rules").status_code == 204
    listed = api.client.get("/v1/inspection_rules").json["inspection_rules"]
    assert [r["uuid"] for r in listed] == [built_in["uuid"]]


def test_patch_add_replace_remove(api):
    path = create(api, description="old", priority=5, scope="rack1").headers["Location"]
    resp = api.client.patch(path, json=[
        {"op": "replace", "path": "/description", "value": "new"},
        {"op": "add", "path": "/conditions", "value": [
            {"op": "eq", "args": [1, 1]}]},
        {"op": "remove", "path": "/scope"},
    ])
    assert resp.status_code == 200, resp.json
    shown = api.client.get(path).json
    assert shown["description"] == "new" and shown["scope"] is None
    assert shown["priority"] == 5 and shown["conditions"] == [{"op": "eq", "args": [1, 1]}]
    removed = api.client.patch(path, json=[{"op": "remove", "path": "/priority"}])
    assert removed.status_code == 200 and removed.json["priority"] == 0


@pytest.mark.parametrize("ops, words", [
    ([{"op": "replace", "path": "/priority", "value": 10000}], "priority"),
    ([{"op": "replace", "path": "/priority", "value": -1}], "priority"),
    ([{"op": "replace", "path": "/built_in", "value": True}], "built_in"),
    ([{"op": "replace", "path": "/uuid", "value": str(uuid.uuid4())}], "uuid"),
    ([{"op": "remove", "path": "/actions"}], "actions"),
    ([{"op": "add", "path": "/colour", "value": "red"}], "colour"),
    ([{"op": "remove", "path": "/nonexistent"}], "patch"),
    ([{"op": "test", "path": "/priority", "value": 99}], "patch"),
    ([{"op": "jump", "path": "/priority"}], "patch"),
])
def test_patch_refusals_change_nothing(api, ops, words):
    path = create(api, description="keep", priority=7).headers["Location"]
    before = api.client.get(path).json
    resp = api.client.patch(path, json=ops)
    assert resp.status_code == 400, resp.json
    assert words in error_message(resp)
    assert api.client.get(path).json == before


def test_patch_body_must_be_a_patch(api):
    path = create(api).headers["Location"]
    for bad in ({"priority": 3}, [1, 2], "x"):
        resp = api.client.patch(path, json=bad)
        assert resp.status_code == 400 and "JSON patch" in error_message(resp)
    assert api.client.patch(f"/v1/inspection_rules/{uuid.uuid4()}",
                            json=[]).status_code == 404
    assert api.client.get("/v1/inspection_rules/not-a-uuid").status_code == 404


def test_sensitive_rules_are_masked_and_stay_sensitive(api):
    secret_action = {"op": "set-attribute",
                     "args": {"path": "/driver_info/ipmi_password", "value": "hunter2"}}
    resp = create(api, sensitive=True, actions=[secret_action])
    assert resp.json["actions"] is None and resp.json["conditions"] is None
    assert "hunter2" not in resp.get_data(as_text=True)
    path = resp.headers["Location"]
    assert api.client.get(path).json["actions"] is None
    listed = api.client.get("/v1/inspection_rules?detail=true").get_data(as_text=True)
    assert "hunter2" not in listed
    for ops in ([{"op": "replace", "path": "/sensitive", "value": False}],
                [{"op": "remove", "path": "/sensitive"}],
                [{"op": "copy", "from": "/built_in", "path": "/sensitive"}],
                [{"op": "move", "from": "/sensitive", "path": "/description"}]):
        refused = api.client.patch(path, json=ops)
        assert refused.status_code == 400, (ops, refused.json)
        assert api.client.get(path).json["sensitive"] is True
    ok = api.client.patch(path, json=[{"op": "replace", "path": "/priority", "value": 3}])
    assert ok.status_code == 200 and ok.json["actions"] is None


SECRET = "hunter2-zq"


def _sensitive_rule(api):
    resp = create(api, sensitive=True, description="visible", scope="rack1",
                  conditions=[{"op": "eq", "args": ["{node.driver_info[ipmi_username]}",
                                                    "{node.driver_info[ipmi_username]}",
                                                    f"{SECRET}-user"]}],
                  actions=[{"op": "set-attribute",
                            "args": {"path": "/driver_info/ipmi_password",
                                     "value": SECRET}}])
    return resp.headers["Location"]


def test_patch_is_no_oracle_for_a_sensitive_rule(api):
    path = _sensitive_rule(api)
    # A right guess and a wrong guess must get the same answer.
    answers = []
    for guess in (SECRET, "wrong-guess"):
        resp = api.client.patch(path, json=[
            {"op": "test", "path": "/actions/0/args/value", "value": guess}])
        assert resp.status_code == 400, resp.json
        answers.append(error_message(resp).replace(guess, "<guess>"))
    assert answers[0] == answers[1]
    for ops in ([{"op": "test", "path": "/conditions/0/args/1", "value": "x"}],
                [{"op": "test", "path": "", "value": {}}],  # the whole rule
                [{"op": "test", "path": "/actions", "value": []}]):
        resp = api.client.patch(path, json=ops)
        assert resp.status_code == 400, (ops, resp.json)
        assert "sensitive" in error_message(resp)


@pytest.mark.parametrize("ops", [
    [{"op": "copy", "from": "/actions/0/args/value", "path": "/description"}],
    [{"op": "move", "from": "/conditions/0/args/2", "path": "/scope"}],
    [{"op": "copy", "from": "/conditions/0/args/2", "path": "/description"}],
    [{"op": "copy", "from": "/actions/0/args", "path": "/description"}],
    [{"op": "copy", "from": "", "path": "/description"}],
    [{"op": "move", "from": "/description", "path": "/actions/0/args/path"}],
])
def test_patch_cannot_lift_a_sensitive_rules_content(api, ops):
    path = _sensitive_rule(api)
    resp = api.client.patch(path, json=ops)
    assert resp.status_code == 400, resp.json
    assert SECRET not in resp.get_data(as_text=True)
    shown = api.client.get(path).json
    assert (shown["description"], shown["scope"]) == ("visible", "rack1")
    listed = api.client.get("/v1/inspection_rules?detail=true").get_data(as_text=True)
    assert SECRET not in listed


@pytest.mark.parametrize("ops", [
    [{"op": "replace", "path": "/actions/0/args/nope/deeper", "value": 1}],
    [{"op": "remove", "path": "/conditions/0/args/7"}],
    [{"op": "add", "path": "/conditions/0/args/value/x", "value": 1}],
])
def test_patch_errors_on_a_sensitive_rule_quote_nothing(api, ops):
    path = _sensitive_rule(api)
    resp = api.client.patch(path, json=ops)
    assert resp.status_code == 400, resp.json
    text = resp.get_data(as_text=True)
    assert SECRET not in text and "ipmi_password" not in text and "driver_info" not in text
    assert "sensitive" in error_message(resp)


def test_sensitive_rule_can_still_be_patched_blindly(api):
    path = _sensitive_rule(api)
    resp = api.client.patch(path, json=[
        {"op": "replace", "path": "/actions", "value": [SET_EXTRA]},
        {"op": "replace", "path": "/description", "value": "rotated"}])
    assert resp.status_code == 200, resp.json
    assert resp.json["description"] == "rotated" and resp.json["actions"] is None


def test_explain_with_inventory_and_with_node(api):
    create(api, description="x86 only",
           conditions=[{"op": "eq", "args": ["{inventory[cpu][architecture]}", "x86_64"]}],
           actions=[SET_EXTRA])
    data = body("bios-vm-x86_64")
    resp = api.client.post("/v1/inspection_rules/explain",
                           json={"inventory": data["inventory"]})
    assert resp.status_code == 200, resp.json
    reports = {r["description"]: r for r in resp.json["rules"]}
    assert reports["x86 only"]["would_run"] is True
    assert reports["x86 only"]["outcome"] == "applied"
    arm = body("aarch64-gigabyte")
    resp = api.client.post("/v1/inspection_rules/explain", json={"inventory": arm["inventory"]})
    assert {r["description"]: r for r in resp.json["rules"]}["x86 only"]["would_run"] is False

    node = add_node(api.context.engine, state="manageable", name="explained",
                    inspect_interface="agent")
    no_inventory = api.client.post("/v1/inspection_rules/explain", json={"node": "explained"})
    assert no_inventory.status_code == 400
    with_node = api.client.post("/v1/inspection_rules/explain",
                                json={"node": node["uuid"], "inventory": data["inventory"]})
    assert with_node.status_code == 200
    assert with_node.json["node"] == node["uuid"]
    assert with_node.json["rules_run_for_node"] is True
    # nothing was written
    shown = api.client.get(f"/v1/nodes/{node['uuid']}").json
    assert shown["extra"] == {}
    assert api.client.post("/v1/inspection_rules/explain",
                           json={"node": "missing"}).status_code == 404
    assert api.client.post("/v1/inspection_rules/explain", json={}).status_code == 400
    assert api.client.post("/v1/inspection_rules/explain",
                           json={"inventory": {}, "phase": "late"}).status_code == 400
