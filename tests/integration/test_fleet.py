"""Fleet operations on every backend, through the API as an operator and a ramdisk use it:
lookup by hardware identity (a replaced NIC, placeholder serials, two nodes claiming one
machine), ``rule test`` dry runs that write nothing, and ``reprocess`` of stored data."""

import copy
import logging
from datetime import datetime

import pytest
import sqlalchemy as sa

from inspection import identity
from inspection.db.models import InspectionRule, Node, NodeInventory, NodeTrait, Port
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.pipeline_support import RecordingNotifier, body

NIC_A = "aa:00:00:00:00:0a"
NIC_C = "aa:00:00:00:00:0c"
SECRET = "sw0rdfish-9"
_TABLES = (Node, Port, NodeInventory, NodeTrait, InspectionRule)
_OLD = datetime(2001, 2, 3, 4, 5, 6)


@pytest.fixture
def api(tmp_path, db_url):
    notifier = RecordingNotifier()
    conf = api_conf(tmp_path, db_url, auto_discovery={"enabled": "true"},
                    inspector={"add_ports": "pxe", "keep_ports": "present"})
    api = Api(conf, notifier=notifier)
    api.notifier = notifier
    yield api
    api.close()


def machine(mac: str, serial: str = "8XJ4T53", **vendor) -> dict:
    """An R640's callback booting from ``mac``, its BMC unreadable (as IPA reports it)."""
    data = body("dell_r640")
    inventory = data["inventory"]
    iface = copy.deepcopy(inventory["interfaces"][0])
    iface.update(name="eno1", mac_address=mac.upper())
    inventory["interfaces"] = [iface]
    inventory["boot"]["pxe_interface"] = mac
    inventory.update(bmc_address="0.0.0.0", bmc_v6address="::/0")
    inventory.pop("bmc_mac", None)
    inventory["system_vendor"].update(serial_number=serial, **vendor)
    return data


def callback(api, data) -> str:
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
    assert resp.status_code == 202, resp.json
    api.wait_processed()
    return resp.json["uuid"]


def state(api, node, target):
    resp = api.client.put(f"/v1/nodes/{node}/states/provision", json={"target": target})
    assert resp.status_code == 202, resp.json
    return resp.json


def node_and_ports(api, node):
    shown = api.client.get(f"/v1/nodes/{node}").json
    ports = api.client.get(f"/v1/ports?node={node}&fields=address").json["ports"]
    return shown, sorted(p["address"] for p in ports)


def node_count(api) -> int:
    return len(api.client.get("/v1/nodes").json["nodes"])


def test_a_machine_with_a_replaced_nic_and_no_bmc_address_completes_its_own_node(api):
    node = callback(api, machine(NIC_A))
    shown, ports = node_and_ports(api, node)
    assert shown["provision_state"] == "enroll" and ports == [NIC_A]
    assert shown["extra"]["hardware_identity"] == {
        "serial": "dell inc.|poweredge r640|8xj4t53"}
    state(api, node, "manage")
    assert state(api, node, "inspect")["provision_state"] == "inspect wait"

    # NIC A was replaced by NIC C; the same manufacturer, model and serial number.
    resp = api.unversioned.post("/v1/continue_inspection", json=machine(
        NIC_C, serial=" 8xj4t53 ", manufacturer="DELL INC."))
    assert resp.status_code == 202 and resp.json["uuid"] == node
    api.wait_processed()
    shown, ports = node_and_ports(api, node)
    assert shown["provision_state"] == "manageable" and shown["last_error"] is None
    assert ports == [NIC_C]  # add_ports = pxe, keep_ports = present
    assert node_count(api) == 1


def test_placeholder_serials_never_merge_machines(api):
    first = callback(api, machine(NIC_A, serial="To Be Filled By O.E.M.",
                                  manufacturer="To be filled by O.E.M.",
                                  product_name="Default string"))
    second = callback(api, machine(NIC_C, serial="  to be filled by o.e.m.  ",
                                   manufacturer="To Be Filled By O.E.M.",
                                   product_name="Default string"))
    assert first != second and node_count(api) == 2
    extras = [api.client.get(f"/v1/nodes/{n}").json["extra"] for n in (first, second)]
    assert extras == [{}, {}]  # nothing that identifies them is stored


def whitebox(mac: str, number: int, keys=("bmc_mac", "system_uuid")) -> dict:
    """A machine whose firmware fills no serial number, with the identity ``keys`` it
    reports this time."""
    data = machine(mac, serial="Default string", manufacturer="To Be Filled By O.E.M.")
    if "bmc_mac" in keys:
        data["inventory"]["bmc_mac"] = f"0C:C4:7A:00:00:{number:02X}"
    if "system_uuid" in keys:
        data["inventory"]["system_vendor"]["system_uuid"] = \
            f"8E3A1C5D-0000-4000-8000-0000000000{number:02X}"
    return data


def test_a_whitebox_machine_is_found_by_its_bmc_mac_or_system_uuid(api):
    first = callback(api, whitebox(NIC_A, 1))
    assert api.client.get(f"/v1/nodes/{first}").json["extra"]["hardware_identity"] == {
        "system_uuid": "8e3a1c5d-0000-4000-8000-000000000001", "bmc_mac": "0c:c4:7a:00:00:01"}
    second = callback(api, whitebox("aa:00:00:00:00:0f", 2))
    for node in (first, second):
        state(api, node, "manage")
        state(api, node, "inspect")
    # New NICs, and only one of the two keys readable this time.
    assert callback(api, whitebox(NIC_C, 1, keys=("bmc_mac",))) == first
    assert callback(api, whitebox("aa:00:00:00:00:0e", 2, keys=("system_uuid",))) == second
    assert node_and_ports(api, first)[1] == [NIC_C]
    assert node_and_ports(api, second)[1] == ["aa:00:00:00:00:0e"]
    assert node_count(api) == 2


def test_two_nodes_claiming_one_machine_is_a_conflict_named_in_the_log(api, caplog):
    node = callback(api, machine(NIC_A))
    # Through another NIC, the machine is its node (no longer waiting): never a second one.
    with caplog.at_level(logging.WARNING, logger="inspection.lookup"):
        again = api.unversioned.post("/v1/continue_inspection", json=machine("aa:00:00:00:00:0b"))
    assert again.status_code == 404 and node_count(api) == 1
    assert f"its hardware identity is node {node}'s, which is in state 'enroll'" \
        in caplog.text
    caplog.clear()
    identity = {"serial": "dell inc.|poweredge r640|8xj4t53"}
    other = api.client.post("/v1/nodes", json={"driver": "fake-hardware",
                                              "extra": {"hardware_identity": identity}})
    state(api, node, "manage")
    state(api, node, "inspect")
    with caplog.at_level(logging.WARNING, logger="inspection.lookup"):
        resp = api.unversioned.post("/v1/continue_inspection", json=machine(NIC_C))
    assert resp.status_code == 404
    assert error_message(resp) == "The requested node could not be found"
    line = next(r.getMessage() for r in caplog.records if "hardware identity" in r.getMessage())
    assert node in line and other.json["uuid"] in line
    assert node_count(api) == 2


def _age_every_row(engine) -> None:
    with engine.begin() as conn:
        for model in _TABLES:
            conn.execute(sa.update(model).values(updated_at=_OLD))


def _every_row(engine) -> dict:
    with engine.connect() as conn:
        return {model.__tablename__: sorted(map(repr, conn.execute(sa.select(model.__table__))))
                for model in _TABLES}


TEST_RULE = {"description": "tag R640s", "conditions": [
    {"op": "eq", "args": ["{inventory[system_vendor][product_name]}", "PowerEdge R640"]}],
    "actions": [{"op": "set-attribute", "args": ["/properties/rack", "r12"]},
                {"op": "set-attribute", "args": ["/driver_info/ipmi_password", SECRET]},
                {"op": "add-trait", "args": ["CUSTOM_R640"]},
                {"op": "set-port-attribute", "args": [NIC_A, "/physical_network", "fab1"]}]}


def test_rule_test_reports_matches_and_changes_and_writes_nothing(api):
    r640 = callback(api, machine(NIC_A))
    other = callback(api, machine(NIC_C, serial="ZZ9", product_name="PowerEdge R650"))
    engine = api.context.engine
    _age_every_row(engine)
    before = _every_row(engine)

    resp = api.client.post("/v1/inspection_rules/test",
                           json={"rules": [TEST_RULE], "nodes": [r640, other]})
    assert resp.status_code == 200, resp.json
    rows = {row["node"]: row for row in resp.json["results"]}
    assert rows[other] == {"node": other, "matched": False, "changes": []}
    assert rows[r640]["matched"] is True
    assert rows[r640]["changes"] == [
        {"path": "/driver_info/ipmi_password", "old": None, "new": "***"},
        {"path": f"/ports/{NIC_A}/physical_network", "old": None, "new": "fab1"},
        {"path": "/properties/rack", "old": None, "new": "r12"},
        {"path": "/traits", "old": [], "new": ["CUSTOM_R640"]}]
    assert SECRET not in resp.get_data(as_text=True)

    # Without nodes: every node with stored data, a page at a time.
    page = api.client.post("/v1/inspection_rules/test?limit=1", json={"rules": TEST_RULE})
    assert len(page.json["results"]) == 1 and "marker=" in page.json["next"]
    rest = api.client.post(page.json["next"], json={"rules": TEST_RULE}).json
    assert {r["node"] for r in page.json["results"] + rest["results"]} == {r640, other}

    bad = api.client.post("/v1/inspection_rules/test",
                          json={"rules": [{"actions": [{"op": "no-such-op"}]}]})
    assert bad.status_code == 400 and "rule 1" in error_message(bad)
    assert _every_row(engine) == before  # not one updated_at moved, nothing else either


def test_reprocess_applies_a_new_rule_to_stored_data_without_booting(api):
    node = callback(api, machine(NIC_A))
    discovered = api.client.post(f"/v1/nodes/{node}/inventory/reprocess")
    assert discovered.status_code == 200 and discovered.json["provision_state"] == "enroll"
    state(api, node, "manage")
    rule = {"conditions": [{"op": "eq", "args": ["{inventory[memory][physical_mb]}", 393216]}],
            "actions": [{"op": "set-attribute", "args": ["/properties/fleet", "big-memory"]}]}
    assert api.client.post("/v1/inspection_rules", json=rule).status_code == 201
    api.notifier.sent.clear()

    resp = api.client.post(f"/v1/nodes/{node}/inventory/reprocess")
    assert resp.status_code == 200, resp.json
    assert resp.json["provision_state"] == "manageable"
    assert {"path": "/properties/fleet", "old": None, "new": "big-memory"} \
        in resp.json["changes"]
    shown = api.client.get(f"/v1/nodes/{node}").json
    assert shown["properties"]["fleet"] == "big-memory"
    assert shown["provision_state"] == "manageable" and shown["power_state"] is None
    assert all(not sent["allow"] for sent in api.notifier.sent)  # no PXE allow

    # All or nothing: a rule that fails leaves the node as it was, state included.
    failing = {"actions": [{"op": "set-attribute", "args": ["/extra/half", "done"]},
                           {"op": "fail", "args": ["not this one"]}]}
    assert api.client.post("/v1/inspection_rules", json=failing).status_code == 201
    resp = api.client.post(f"/v1/nodes/{node}/inventory/reprocess")
    assert resp.status_code == 400 and "not this one" in error_message(resp)
    after = api.client.get(f"/v1/nodes/{node}").json
    assert "half" not in after["extra"] and after["provision_state"] == "manageable"
    assert after["last_error"] is None


def test_reprocess_without_stored_inventory_or_while_inspecting_is_a_conflict(api):
    node = api.client.post("/v1/nodes", json={"driver": "fake-hardware"}).json["uuid"]
    state(api, node, "manage")
    resp = api.client.post(f"/v1/nodes/{node}/inventory/reprocess")
    assert resp.status_code == 409
    assert "no stored inventory" in error_message(resp)
    state(api, node, "inspect")
    resp = api.client.post(f"/v1/nodes/{node}/inventory/reprocess")
    assert resp.status_code == 409 and "'inspect wait'" in error_message(resp)


def test_reprocess_waits_for_no_one_holding_the_node_and_changes_nothing(api):
    node = callback(api, machine(NIC_A))
    api.context.service.lock_interval = 0.05
    with api.context.engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.uuid == node).values(reservation="conductor-7"))
    before = _every_row(api.context.engine)
    resp = api.client.post(f"/v1/nodes/{node}/inventory/reprocess")
    assert resp.status_code == 409 and "try again later" in error_message(resp)
    assert _every_row(api.context.engine) == before


def test_identity_lookup_is_an_index_lookup(db_engine):
    rows = [{"uuid": f"00000000-0000-4000-8000-{i:012d}", "provision_state": "manageable",
             "extra": {"hardware_identity": {"serial": f"acme|box|sn{i}"}}} for i in range(300)]
    # Firmware strings with NUL or lone surrogates elsewhere in extra: the index must not
    # make such a node unwritable (PostgreSQL's JSON types refuse both).
    rows[9]["extra"]["note"] = "a\x00b\ud800c"
    with db_engine.begin() as conn:
        conn.execute(sa.insert(Node), rows)
        conn.execute(sa.text({"sqlite": "ANALYZE", "postgresql": "ANALYZE nodes",
                              "mysql": "ANALYZE TABLE nodes"}[conn.dialect.name]))
    keys = {"serial": "acme|box|sn7", "system_uuid": "4c4c4544-0058-4a10-8034-b8c04f543533",
            "bmc_mac": "d0:94:66:2b:6c:00"}
    with db_engine.connect() as conn:
        assert [r[1] for r in identity.matching_nodes(conn, keys)] == [rows[7]["uuid"]]
        assert [r[1] for r in identity.matching_nodes(conn, {"serial": "acme|box|sn9"})] \
            == [rows[9]["uuid"]]
        sql = str(identity.matching_query(conn, keys).compile(
            conn, compile_kwargs={"literal_binds": True}))
        if conn.dialect.name == "postgresql":  # 300 rows: a scan would be cheaper
            conn.execute(sa.text("SET enable_seqscan = off"))
        explain = "EXPLAIN QUERY PLAN " if conn.dialect.name == "sqlite" else "EXPLAIN "
        plan = " ".join(map(str, conn.execute(sa.text(explain + sql)).all()))
    for key in identity.KEYS:
        assert f"nodes_hardware_{key}_idx" in plan, plan
