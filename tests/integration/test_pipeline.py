"""The whole inspection pipeline (accept + process) on every backend with real IPA inventories."""

import logging

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node, NodeInventory
from inspection.errors import NotFound
from inspection.processing.service import InspectionService
from pxe_filter.common.config import ConfigError
from pxe_filter.common.database import create_engine
from tests.integration.filter_listener import listener  # noqa: F401 - fixture
from tests.integration.node_factory import add_node, make_conf, node_row, set_state
from tests.integration.pipeline_support import (
    RecordingNotifier,
    body,
    macs_of,
    service_for,
    snapshot,
    write_rules,
)

DELL = "uefi-dell-r640"
PXE_MAC = "b0:7b:25:d3:0a:10"


def _waiting_dell(engine, **columns):
    return add_node(engine, macs=["b0:7b:25:d3:0a:11"], bmc_cache=["192.0.2.200"],
                    inspect_interface="agent", driver_info={"ipmi_address": "192.0.2.200"},
                    properties={"capabilities": "boot_option:local"}, **columns)


def test_waiting_node_becomes_manageable(db_engine, tmp_path):
    node = _waiting_dell(db_engine)
    service = service_for(db_engine, tmp_path,
                          inspector={"hooks": "$default_hooks,memory,cpus,boot-mode",
                                     "add_ports": "all"})
    data = body(DELL)
    accepted = service.accept(data)  # found by BMC address and MACs
    assert accepted.node_uuid == node["uuid"]
    service.process(accepted.node_uuid, accepted.data)

    after = snapshot(db_engine, node["id"])
    row = after["node"]
    assert row["provision_state"] == "manageable"
    assert row["target_provision_state"] is None and row["last_error"] is None
    assert row["inspection_finished_at"] is not None and row["reservation"] is None
    assert "lookup_bmc_addresses" not in row["driver_internal_info"]
    assert row["properties"]["cpu_arch"] == "x86_64"
    assert row["properties"]["memory_mb"] == 196608
    assert row["properties"]["cpus"] == 80
    caps = set(row["properties"]["capabilities"].split(","))
    assert {"boot_option:local", "boot_mode:uefi"} <= caps
    # add_ports=all: a port per interface; only the PXE one is pxe_enabled.
    ports = {address: pxe for address, pxe, _extra, _net in after["ports"]}
    assert ports == {mac: mac == PXE_MAC for mac in macs_of(data)}
    # Latest inventory stored, plugin data without the ramdisk logs.
    ((inventory, plugin_data),) = after["inventories"]
    assert inventory == data["inventory"]
    assert "logs" not in plugin_data and plugin_data["root_disk"] == data["root_disk"]
    assert sorted(plugin_data["macs"]) == sorted(macs_of(data))
    assert service.notifier.denied() == [sorted(macs_of(data))]


def test_reinspection_keeps_only_the_latest_inventory(db_engine, tmp_path):
    node = _waiting_dell(db_engine)
    service = service_for(db_engine, tmp_path)
    first = body(DELL)
    service.process(service.accept(first).node_uuid, first)
    set_state(db_engine, node["id"], "inspect wait")
    second = body(DELL)
    second["inventory"]["memory"]["physical_mb"] = 1024
    service.process(node["uuid"], service.accept(second, node_uuid=node["uuid"]).data)
    with db_engine.connect() as conn:
        stored = conn.execute(sa.select(NodeInventory.inventory_data)
                              .where(NodeInventory.node_id == node["id"])).scalars().all()
    assert [inv["memory"]["physical_mb"] for inv in stored] == [1024]


@pytest.mark.parametrize("fixture, driver, expected_info", [
    ("dell_r640", "idrac", {"ipmi_address": "192.168.25.31",
                            "redfish_address": "https://[2001:db8:25::31]"}),
    ("aarch64-gigabyte", "ipmi", {"ipmi_address": "10.20.1.77"}),
    ("bios-vm-x86_64", "fake-hardware", {}),  # BMC 0.0.0.0: no rule applies
])
def test_discovered_nodes_reach_the_built_in_rules(db_engine, tmp_path, fixture, driver,
                                                   expected_info):
    rules = write_rules(tmp_path, "discovered-ipmi.yaml", "dell-ipv6.yaml")
    service = service_for(db_engine, tmp_path, auto_discovery={"enabled": True,
                                                               "inspection_scope": "edge"},
                          inspection_rules={"built_in_rules": rules})
    data = body(fixture)
    data.pop("error", None)
    accepted = service.accept(data)
    service.process(accepted.node_uuid, accepted.data)
    with db_engine.connect() as conn:
        node_id = conn.execute(sa.select(Node.id)
                               .where(Node.uuid == accepted.node_uuid)).scalar_one()
    row = snapshot(db_engine, node_id)["node"]
    assert row["auto_discovered"] and row["provision_state"] == "enroll"
    assert row["last_error"] is None and row["inspection_finished_at"] is not None
    assert row["driver"] == driver
    assert {k: v for k, v in row["driver_info"].items() if k.endswith("_address")} == \
        expected_info
    if expected_info:  # credentials were set by the sensitive rules
        assert any(k.endswith("_password") for k in row["driver_info"])
    assert row["properties"]["inspection_scope"] == "edge"
    assert row["properties"]["cpu_arch"]
    # The same machine again: its node is not waiting, so it is neither found nor re-enrolled.
    with pytest.raises(NotFound):
        service.accept(body(fixture))
    with db_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(Node)).scalar() == 1


def _rule(repo_service, session_factory, doc):
    with session_factory.begin() as session:
        return repo_service.rules.repository.create(session, doc)


def test_rules_follow_interface_and_scope(db_engine, tmp_path):
    service = service_for(db_engine, tmp_path)
    factory = service.sessions
    _rule(service, factory, {"actions": [{"op": "set-attribute",
                                          "args": ["/extra/tagged", "all"]}]})
    _rule(service, factory, {"scope": "rack-1", "priority": 1, "actions": [
        {"op": "set-attribute", "args": ["/extra/scoped", True]}]})
    plain = _waiting_dell(db_engine)
    scoped = add_node(db_engine, macs=["52:54:00:6e:1a:01"], inspect_interface="agent",
                      properties={"inspection_scope": "rack-1"})
    other_iface = add_node(db_engine, macs=["e8:eb:d3:4f:90:2a"],
                           inspect_interface="redfish")
    for name in (DELL, "bios-vm-x86_64", "aarch64-gigabyte"):
        accepted = service.accept(body(name))
        service.process(accepted.node_uuid, accepted.data)

    def rules_wrote(node):  # the hardware identity is the service's own, not a rule's
        row = node_row(db_engine, node["id"])
        return row, {k: v for k, v in row.extra.items() if k != "hardware_identity"}

    assert rules_wrote(plain)[1] == {"tagged": "all"}
    assert rules_wrote(scoped)[1] == {"tagged": "all", "scoped": True}
    row, extra = rules_wrote(other_iface)
    assert row.provision_state == "manageable" and extra == {}


def test_rules_cache_sees_updates(db_engine, tmp_path):
    service = service_for(db_engine, tmp_path)
    rule = _rule(service, service.sessions, {"actions": [
        {"op": "set-attribute", "args": ["/extra/generation", 1]}]})
    node = _waiting_dell(db_engine)

    def inspect():
        set_state(db_engine, node["id"], "inspect wait")
        service.process(node["uuid"], service.accept(body(DELL)).data)
        return node_row(db_engine, node["id"]).extra["generation"]

    assert inspect() == 1
    compiled = service.rules._compiled[rule.uuid][1]
    assert inspect() == 1
    assert service.rules._compiled[rule.uuid][1] is compiled  # reused, not recompiled
    with service.sessions.begin() as session:
        service.rules.repository.update(session, rule.uuid, {"actions": [
            {"op": "set-attribute", "args": ["/extra/generation", 2]}]})
    assert inspect() == 2
    with service.sessions.begin() as session:
        service.rules.repository.delete(session, rule.uuid)
    assert inspect() == 2 and rule.uuid not in service.rules._compiled


def test_process_on_an_aborted_node_does_nothing(db_engine, tmp_path, caplog):
    node = _waiting_dell(db_engine)
    service = service_for(db_engine, tmp_path)
    accepted = service.accept(body(DELL))
    set_state(db_engine, node["id"], "inspect failed")  # aborted meanwhile
    before = snapshot(db_engine, node["id"])
    with caplog.at_level(logging.WARNING, logger="inspection.processing.service"):
        service.process(accepted.node_uuid, accepted.data)
    assert snapshot(db_engine, node["id"]) == before
    assert "inspect failed" in caplog.text and node["uuid"] in caplog.text
    assert service.notifier.sent == []


def test_deny_broadcast_reaches_a_filter(sqlite_url, tmp_path, listener):  # noqa: F811
    notifier, endpoint = listener
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    try:
        _waiting_dell(engine)
        service = service_for(engine, tmp_path, notifier=notifier)
        accepted = service.accept(body(DELL))
        service.process(accepted.node_uuid, accepted.data)
        calls = endpoint.wait_for(lambda calls: calls)
        assert calls == [{"allow": [], "deny": [PXE_MAC, "b0:7b:25:d3:0a:11"]}]
    finally:
        engine.dispose()


@pytest.mark.parametrize("group, values, needle", [
    ("inspector", {"hooks": "$default_hooks,no-such-hook"}, "no-such-hook"),
    ("inspector", {"hooks": "ports"}, "validate-interfaces"),
    ("inspection_rules", {"built_in_rules": "/nonexistent/rules.yaml"}, "/nonexistent"),
])
def test_broken_configuration_is_refused_at_start(tmp_path, group, values, needle):
    conf = make_conf(tmp_path, **{group: values})
    with pytest.raises(ConfigError) as exc:
        InspectionService.from_conf(conf, engine=object(), notifier=RecordingNotifier())
    assert needle in str(exc.value)


def test_built_in_rules_file_with_a_bad_rule_is_refused(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("- actions: [{op: set-attribute, args: [/nowhere/x, 1]}]\n")
    conf = make_conf(tmp_path, inspection_rules={"built_in_rules": str(path)})
    with pytest.raises(ConfigError, match="rule 0"):
        InspectionService.from_conf(conf, engine=object(), notifier=RecordingNotifier())
