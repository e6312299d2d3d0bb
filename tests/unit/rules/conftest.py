"""Shared fixtures for rules tests: a realistic IPA inventory and a rule runner."""

import copy
import json
import pathlib

import pytest

from inspection.rules import InMemoryNode, RulesEngine, validate_rule

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "inventories"
NODE_UUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"


@pytest.fixture
def ipa_data():
    """The body IPA posted for a Dell PowerEdge R640."""
    return json.loads((FIXTURES / "dell_r640.json").read_text())


@pytest.fixture
def inventory(ipa_data):
    return ipa_data["inventory"]


@pytest.fixture
def node():
    return InMemoryNode(
        {"uuid": NODE_UUID, "name": "r640-1", "driver": "ipmi", "auto_discovered": False,
         "driver_info": {"ipmi_address": "192.168.25.31", "ipmi_username": "root",
                         "ipmi_password": "s3cret!", "auth_token": "tok-8842"},
         "properties": {"capabilities": "boot_mode:uefi,cpu_vt:true"},
         "extra": {}, "provision_state": "inspecting", "inspect_interface": "agent"},
        ports=[{"uuid": "0a5c3d2e-8c59-4c3a-9b1e-5f6f0b0e0001", "address": "e4:43:4b:5c:10:a0",
                "pxe_enabled": True, "extra": {}, "local_link_connection": {},
                "physical_network": None}],
        traits=["CUSTOM_EXISTING"])


def make_rule(conditions=None, actions=None, **fields):
    """A validated rule (early phase unless given); actions default to a harmless log."""
    fields.setdefault("phase", "early")
    doc = {"conditions": conditions or [],
           "actions": actions or [{"op": "log", "args": ["matched"]}], **fields}
    return validate_rule(copy.deepcopy(doc), built_in=fields.get("priority", 0) not in
                         range(10000))


def run(rules, inventory, plugin_data=None, *, node=None, phase="main", mask="always"):
    """Apply rules; return the UUIDs of rules that ran."""
    engine = RulesEngine(mask)
    return engine.apply(rules, phase, inventory, {} if plugin_data is None else plugin_data,
                        node)
