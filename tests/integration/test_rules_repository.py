"""The rules repository and the ORM node adapter on SQLite, PostgreSQL and MariaDB."""

import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import sessionmaker

from inspection.db.engine import session_scope
from inspection.db.models import InspectionRule, Node, NodeTrait, Port
from inspection.rules import (
    BuiltInRuleError,
    OrmNode,
    RuleConflict,
    RuleExecutionError,
    RuleNotFound,
    RuleRepository,
    RulesEngine,
    RuleValidationError,
    validate_rule,
)

LOG = [{"op": "log", "args": ["x"]}]


@pytest.fixture
def factory(db_engine):
    return sessionmaker(bind=db_engine, expire_on_commit=False)


@pytest.fixture
def repo():
    built_in = [validate_rule({"uuid": "00000000-0000-4000-8000-000000000001", "priority": -1,
                               "actions": LOG, "description": "builtin"}, built_in=True)]
    return RuleRepository(built_in, default_scope="default-scope")


def test_crud(factory, repo):
    with session_scope(factory) as s:
        a = repo.create(s, {"actions": LOG, "priority": 5, "phase": "preprocess"})
        b = repo.create(s, {"actions": LOG, "scope": "lab", "sensitive": True,
                            "conditions": [{"op": "eq", "args": [1, 1]}]})
        c = repo.create(s, {"actions": LOG, "phase": "early"})
    assert a.scope == "default-scope" and c.scope is None
    with session_scope(factory) as s:
        got = repo.get(s, b.uuid.upper())
        assert got.sensitive and got.conditions == [{"op": "eq", "args": [1, 1]}]
        assert got.created_at is not None
        listed = repo.list(s)
        assert [r.uuid for r in listed] == [a.uuid, b.uuid, c.uuid,
                                            "00000000-0000-4000-8000-000000000001"]
        assert listed[-1].built_in and listed[-1].to_dict()["built_in"] is True
        assert [r.uuid for r in repo.list(s, scope="lab")] == [b.uuid]
        assert [r.uuid for r in repo.list(s, phase="early")] == [c.uuid]
        assert [r.uuid for r in repo.list(s, phase="main", scope="lab")] == [b.uuid]
        with pytest.raises(RuleValidationError, match="phase: must be one of"):
            repo.list(s, phase="late")
    with session_scope(factory) as s:
        updated = repo.update(s, a.uuid, {"priority": 7, "description": "new"})
        assert (updated.priority, updated.description) == (7, "new")
    with session_scope(factory) as s:
        assert repo.get(s, a.uuid).priority == 7
        repo.delete(s, a.uuid)
    with session_scope(factory) as s, pytest.raises(RuleNotFound):
        repo.get(s, a.uuid)
    with session_scope(factory) as s:
        assert repo.delete_all(s) == 2
    with session_scope(factory) as s:
        assert [r.built_in for r in repo.list(s)] == [True]


def test_errors(factory, repo):
    builtin_uuid = "00000000-0000-4000-8000-000000000001"
    with session_scope(factory) as s:
        rule = repo.create(s, {"actions": LOG, "sensitive": True})
    with session_scope(factory) as s:
        with pytest.raises(RuleConflict):
            repo.create(s, {"actions": LOG, "uuid": rule.uuid})
        with pytest.raises(RuleConflict):
            repo.create(s, {"actions": LOG, "uuid": builtin_uuid})
        with pytest.raises(BuiltInRuleError, match="cannot be deleted"):
            repo.delete(s, builtin_uuid)
        with pytest.raises(BuiltInRuleError, match="cannot be changed"):
            repo.update(s, builtin_uuid, {"priority": 1})
        with pytest.raises(BuiltInRuleError):
            repo.patch(s, builtin_uuid, [{"op": "replace", "path": "/priority", "value": 1}])
        with pytest.raises(RuleNotFound):
            repo.delete(s, str(uuid.uuid4()))
        with pytest.raises(RuleNotFound):
            repo.get(s, "../../etc/passwd")
        with pytest.raises(RuleValidationError) as info:
            repo.create(s, {"actions": [{"op": "set-attribute", "args": {}}], "priority": 10000})
        assert info.value.problems == [
            "priority: must be between 0 and 9999 (other values are reserved for built-in "
            "rules)", "actions[0].args.path: required", "actions[0].args.value: required"]
        for patch, problem in [
            ([{"op": "remove", "path": "/sensitive"}], "sensitive: a sensitive rule cannot"),
            ([{"op": "replace", "path": "/sensitive", "value": False}], "sensitive: a sensitive"),
            ([{"op": "replace", "path": "/built_in", "value": True}], "built_in: cannot be"),
            ([{"op": "replace", "path": "/priority", "value": 10000}], "priority: must be"),
            ([{"op": "remove", "path": "/actions"}], "actions: required"),
            ([{"op": "replace", "path": "/nope", "value": 1}], "patch: "),
            ([{"op": "add", "path": "/nope", "value": 1}], "nope: unknown field"),
            ("not a patch", "patch: "),
        ]:
            with pytest.raises(RuleValidationError, match=problem):
                repo.patch(s, rule.uuid, patch)
    with session_scope(factory) as s:
        patched = repo.patch(s, rule.uuid, [
            {"op": "replace", "path": "/priority", "value": 9},
            {"op": "add", "path": "/conditions", "value": [{"op": "is-true", "args": [True]}]}])
        assert patched.priority == 9 and patched.sensitive
        assert patched.to_dict()["conditions"] is None
    with session_scope(factory) as s:
        assert repo.get(s, rule.uuid).conditions == [{"op": "is-true", "args": [True]}]


def _node(s):
    node = Node(uuid=str(uuid.uuid4()), driver="ipmi", driver_info={"ipmi_password": "pw"},
                properties={"capabilities": "boot_mode:uefi"}, extra={},
                provision_state="inspecting", inspect_interface="agent")
    s.add(node)
    s.flush()
    s.add(Port(uuid=str(uuid.uuid4()), address="52:54:00:12:34:56", node_id=node.id,
               extra={}, local_link_connection={}))
    s.add(NodeTrait(node_id=node.id, trait="CUSTOM_OLD"))
    s.flush()
    return node


def test_orm_adapter_changes_are_committed(factory):
    rule = validate_rule({"actions": [
        {"op": "set-attribute", "args": ["/driver_info/ipmi_address", "{inventory[bmc_address]}"]},
        {"op": "set-attribute", "args": ["/extra/copy", "{node.driver_info[ipmi_password]}"]},
        {"op": "set-capability", "args": ["boot_mode", "bios"]},
        {"op": "add-trait", "args": ["CUSTOM_NEW"]}, {"op": "remove-trait", "args": ["CUSTOM_OLD"]},
        {"op": "set-port-attribute", "args": ["52:54:00:12:34:56", "/extra/seen", True]},
        {"op": "set-port-attribute", "args": ["52:54:00:12:34:56", "/physical_network", "p1"]},
    ]})
    with session_scope(factory) as s:
        node = _node(s)
        node_id = node.id
        RulesEngine("never").apply([rule], "main", {"bmc_address": "192.0.2.9"}, {},
                                   OrmNode(s, node))
    with session_scope(factory) as s:
        node = s.get(Node, node_id)
        assert node.driver_info == {"ipmi_password": "pw", "ipmi_address": "192.0.2.9"}
        assert node.extra == {"copy": "pw"}
        assert node.properties == {"capabilities": "boot_mode:bios"}
        traits = s.execute(sa.select(NodeTrait.trait).where(NodeTrait.node_id == node_id))
        assert traits.scalars().all() == ["CUSTOM_NEW"]
        port = s.execute(sa.select(Port).where(Port.node_id == node_id)).scalar_one()
        assert (port.extra, port.physical_network) == ({"seen": True}, "p1")


def test_orm_adapter_changes_roll_back_on_failure(factory):
    rule = validate_rule({"actions": [
        {"op": "set-attribute", "args": ["/extra/half", "done"]},
        {"op": "set-port-attribute", "args": ["00:00:00:00:00:99", "/extra/x", 1]}]})
    with session_scope(factory) as s:
        node_id = _node(s).id
    with pytest.raises(RuleExecutionError), session_scope(factory) as s:
        RulesEngine().apply([rule], "main", {}, {}, OrmNode(s, s.get(Node, node_id)))
    with session_scope(factory) as s:
        assert s.get(Node, node_id).extra == {}
        assert s.execute(sa.select(sa.func.count()).select_from(InspectionRule)).scalar() == 0
