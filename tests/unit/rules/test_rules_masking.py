"""mask_secrets always/never/sensitive: what rules read, and what people see."""

import logging

import pytest

from inspection.rules import RulesEngine
from inspection.rules.errors import RuleExecutionError
from inspection.rules.masking import is_secret_key
from tests.unit.rules.conftest import make_rule, run

COPY = [{"op": "set-attribute", "args": ["/extra/copied", "{node.driver_info[ipmi_password]}"]},
        {"op": "set-attribute", "args": ["/extra/info", "{node.driver_info}"]},
        {"op": "set-plugin-data", "args": ["/inv", "{inventory[bmc_info]}"]}]


@pytest.mark.parametrize(("mode", "sensitive", "sees_secrets"), [
    ("always", False, False), ("always", True, False),
    ("never", False, True), ("never", True, True),
    ("sensitive", False, False), ("sensitive", True, True),
])
def test_what_actions_read(mode, sensitive, sees_secrets, inventory, node):
    inventory = {**inventory, "bmc_info": {"bmc_password": "inv-pw", "user": "u"}}
    data = {}
    if sees_secrets:
        run([make_rule(actions=COPY, phase="main", sensitive=sensitive)], inventory, data,
            node=node, mask=mode)
        extra = node.node["extra"]
        assert extra["copied"] == "s3cret!"
        assert extra["info"]["auth_token"] == "tok-8842"
        assert data["inv"] == {"bmc_password": "inv-pw", "user": "u"}
    else:  # masked means masked: an action copies neither the secret nor *** over one
        for action in COPY:
            rule = make_rule(actions=[action], phase="main", sensitive=sensitive)
            with pytest.raises(RuleExecutionError) as caught:
                run([rule], inventory, data, node=node, mask=mode)
            assert "s3cret" not in str(caught.value) and "inv-pw" not in str(caught.value)
            if not sensitive:
                assert "masked secret: a rule may not copy it" in str(caught.value)
        assert node.node["extra"] == {} and data == {}
    assert node.node["driver_info"]["ipmi_password"] == "s3cret!"  # the source is untouched


def test_masked_secrets_are_not_copied_over_themselves(inventory, node):
    rule = make_rule(actions=[{"op": "set-attribute",
                               "args": ["/driver_info", "{node.driver_info}"]}], phase="main")
    with pytest.raises(RuleExecutionError):
        run([rule], inventory, {}, node=node)
    assert node.node["driver_info"]["ipmi_password"] == "s3cret!"


def test_log_messages_still_show_masked_secrets(inventory, node, caplog):
    rule = make_rule(actions=[{"op": "log", "args": ["pw {node.driver_info[ipmi_password]}"]}],
                     phase="main")
    caplog.set_level(logging.DEBUG)
    run([rule], inventory, {}, node=node)
    assert "pw ***" in caplog.text and "s3cret" not in caplog.text


def test_conditions_see_masked_values_by_default(inventory, node):
    cond = [{"op": "eq", "args": ["{node.driver_info[ipmi_password]}", "s3cret!"]}]
    assert run([make_rule(cond, phase="main")], inventory, node=node) == []
    assert run([make_rule(cond, phase="main")], inventory, node=node, mask="never")


def test_explain_is_masked_even_when_rules_see_secrets(inventory, node):
    rule = make_rule([{"op": "!is-empty", "args": ["{node.driver_info[ipmi_password]}"]}],
                     [{"op": "set-attribute", "args": ["/extra/pw",
                                                       "{node.driver_info[ipmi_password]}"]},
                      {"op": "set-attribute", "args": ["/driver_info/redfish_password", "lit"]},
                      {"op": "log", "args": ["{node.driver_info}"]}], phase="main")
    report = RulesEngine("never").explain([rule], inventory, {}, node)[0]
    assert report["would_run"] and report["conditions"][0]["result"] is True
    text = repr(report)
    assert "s3cret" not in text and "'lit'" not in text and "tok-8842" not in text
    assert report["conditions"][0]["args"]["value"] == "***"
    assert report["actions"][1]["args"] == {"path": "/driver_info/redfish_password",
                                            "value": "***"}
    assert node.node["extra"] == {}  # explain changes nothing


def test_passwords_inside_urls_are_masked_like_secret_keys(inventory, node):
    node.node["driver_info"]["redfish_address"] = "https://admin:Url-Pa55@bmc.example/rf"
    rule = make_rule([{"op": "contains", "args": ["{node.driver_info[redfish_address]}",
                                                  "bmc"]}],
                     [{"op": "set-attribute", "args": ["/extra/bmc",
                                                       "{node.driver_info[redfish_address]}"]},
                      {"op": "set-attribute", "args": ["/extra/info", "{node.driver_info}"]}],
                     phase="main")
    report = RulesEngine("never").explain([rule], inventory, {}, node)[0]
    assert "Url-Pa55" not in repr(report) and report["would_run"]
    with pytest.raises(RuleExecutionError) as caught:  # masked: not copied at all
        run([rule], inventory, node=node)
    assert "Url-Pa55" not in str(caught.value) and node.node["extra"] == {}
    run([rule], inventory, node=node, mask="never")
    assert node.node["extra"]["bmc"] == "https://admin:Url-Pa55@bmc.example/rf"


@pytest.mark.parametrize(("key", "secret"), [
    ("ipmi_password", True), ("bmc_password", True), ("auth_token", True),
    ("redfish_password", True), ("snmp_auth_key", True), ("ipmi_kg", True),
    ("client_secret", True), ("ssh_private_key", True), ("Credentials", True),
    ("passwd", True), ("key", True), ("keyboard", False), ("ipmi_address", False),
    ("ipmi_username", False), ("serial_number", False), ("monkey_business", False),
    (3, False),
])
def test_secret_key_names(key, secret):
    assert is_secret_key(key) is secret
