"""A failure at any stage leaves the node as it was except 'inspect failed' + last_error."""


import pytest
import sqlalchemy as sa

from inspection import locking
from inspection.db.models import Node, NodeInventory
from inspection.errors import BadRequest, NodeLocked, NotFound
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node, node_row
from tests.integration.pipeline_support import (
    body,
    changed_fields,
    service_for,
    snapshot,
)
from tests.support import concurrency

DELL = "uefi-dell-r640"
# What a failed run may change, and nothing else (updated_at moves with any UPDATE).
FAILURE_FIELDS = {"provision_state", "target_provision_state", "last_error",
                  "driver_internal_info", "updated_at"}


def _waiting(engine):
    return add_node(engine, macs=["b0:7b:25:d3:0a:11"], bmc_cache=["192.0.2.200"],
                    inspect_interface="agent", properties={"cpu_arch": "old"},
                    target_provision_state="manageable", extra={"keep": "me"})


def _store_previous_inventory(engine, node_id):
    with engine.begin() as conn:
        conn.execute(sa.insert(NodeInventory).values(
            node_id=node_id, inventory_data={"previous": True}, plugin_data={}))


def _add_rules(service, *docs):
    with service.sessions.begin() as session:
        for doc in docs:
            service.rules.repository.create(session, doc)


TAG_FIRST = {"priority": 100, "actions": [
    {"op": "set-attribute", "args": ["/extra/tagged", True]},
    {"op": "add-trait", "args": ["CUSTOM_TAGGED"]}]}


def _fail_rule(phase, sensitive=False):
    return {"phase": phase, "sensitive": sensitive, "description": "refuse Dell",
            "conditions": [{"op": "contains",
                            "args": ["{inventory[system_vendor][manufacturer]}", "Dell"]}],
            "actions": [{"op": "fail", "args": ["house-sauce {inventory[bmc_address]}"]}]}


def _assert_failed_only(engine, node_id, before, expected_error):
    after = snapshot(engine, node_id)
    assert changed_fields(before, after) <= FAILURE_FIELDS
    row = after["node"]
    assert row["provision_state"] == "inspect failed"
    assert row["target_provision_state"] is None and row["reservation"] is None
    assert "lookup_bmc_addresses" not in row["driver_internal_info"]
    assert expected_error(row["last_error"]), row["last_error"]
    return row["last_error"]


@pytest.mark.parametrize("case", ["early-rule", "ramdisk", "preprocess-hook",
                                  "preprocess-rule", "main-rule", "sensitive-rule"])
def test_failure_leaves_node_unchanged(db_engine, tmp_path, case):
    node = _waiting(db_engine)
    _store_previous_inventory(db_engine, node["id"])
    inspector = {"add_ports": "all", "keep_ports": "present",
                 "hooks": "$default_hooks,memory"}
    if case == "preprocess-hook":
        inspector["add_ports"] = "active"
    service = service_for(db_engine, tmp_path, inspector=inspector)
    _add_rules(service, TAG_FIRST)
    data = body(DELL)
    if case == "ramdisk":
        data["error"] = "Hardware manager failed: disk /dev/sdb vanished"
    if case == "preprocess-hook":
        for iface in data["inventory"]["interfaces"]:
            iface["ipv4_address"] = iface["ipv6_address"] = None
    phase = {"early-rule": "early", "preprocess-rule": "preprocess"}.get(case, "main")
    if case.endswith("rule"):
        _add_rules(service, _fail_rule(phase, sensitive=case == "sensitive-rule"))
    before = snapshot(db_engine, node["id"])

    if case == "early-rule":
        with pytest.raises(BadRequest) as exc:
            service.accept(data)
        assert "house-sauce" not in str(exc.value)  # the ramdisk learns nothing
    else:
        accepted = service.accept(data)
        service.process(accepted.node_uuid, accepted.data)

    expected = {
        "early-rule": lambda e: "(early phase): house-sauce 192.0.2.200" in e,
        "ramdisk": lambda e: e == "Ramdisk reported error: Hardware manager failed: "
                                  "disk /dev/sdb vanished",
        "preprocess-hook": lambda e: e.startswith("Preprocessing inspection data failed: "
                                                  "validate-interfaces hook: "),
        "preprocess-rule": lambda e: "(preprocess phase): house-sauce" in e,
        "main-rule": lambda e: "(main phase): house-sauce" in e,
        "sensitive-rule": lambda e: "sensitive inspection rule" in e and "secret" not in
        e.replace("sensitive", ""),
    }[case]
    _assert_failed_only(db_engine, node["id"], before, expected)
    assert service.notifier.denied() == [["b0:7b:25:d3:0a:11"]]


def test_a_data_error_while_storing_fails_the_inspection(db_url, db_engine, tmp_path):
    """The data itself is refused (every backend's data or integrity error): retrying
    cannot help, so the node fails. Other database errors are retried, see test_db_retry."""
    node = _waiting(db_engine)
    _store_previous_inventory(db_engine, node["id"])
    service = service_for(db_engine, tmp_path, inspector={"add_ports": "all"})
    before = snapshot(db_engine, node["id"])
    accepted = service.accept(body(DELL))
    dialect = db_engine.dialect.name
    create, drop = {
        "sqlite": (["CREATE TRIGGER no_inventory BEFORE INSERT ON node_inventory BEGIN "
                    "SELECT RAISE(ABORT, 'simulated: value out of range'); END"],
                   ["DROP TRIGGER no_inventory"]),
        "postgresql": (["CREATE FUNCTION no_inventory() RETURNS trigger AS $$ BEGIN "
                        "RAISE EXCEPTION 'simulated: value out of range' USING ERRCODE = "
                        "'numeric_value_out_of_range'; END $$ LANGUAGE plpgsql",
                        "CREATE TRIGGER no_inventory BEFORE INSERT ON node_inventory "
                        "FOR EACH ROW EXECUTE FUNCTION no_inventory()"],
                       ["DROP TRIGGER no_inventory ON node_inventory",
                        "DROP FUNCTION no_inventory()"]),
        "mysql": (["CREATE TRIGGER no_inventory BEFORE INSERT ON node_inventory FOR EACH ROW "
                   "SIGNAL SQLSTATE '22003' SET MESSAGE_TEXT = 'simulated: value out of range', "
                   "MYSQL_ERRNO = 1264"],
                  ["DROP TRIGGER no_inventory"]),
    }[dialect]
    with db_engine.begin() as conn:
        for statement in create:
            conn.execute(sa.text(statement))
    try:
        service.process(accepted.node_uuid, accepted.data)
    finally:
        with db_engine.begin() as conn:
            for statement in drop:
                conn.execute(sa.text(statement))
    error = _assert_failed_only(db_engine, node["id"], before,
                                lambda e: "storing the inspection data" in e)
    assert "simulated: value out of range" in error and "INSERT" not in error
    # The ports the hooks created were rolled back with everything else; the previous
    # inventory is still there.
    assert snapshot(db_engine, node["id"])["inventories"] == before["inventories"]


def test_lookup_failure_changes_nothing(db_engine, tmp_path):
    node = add_node(db_engine, state="available", macs=["b0:7b:25:d3:0a:10"])
    service = service_for(db_engine, tmp_path)
    before = snapshot(db_engine, node["id"])
    with pytest.raises(NotFound) as exc:
        service.accept(body(DELL))
    assert node["uuid"] not in str(exc.value)
    assert snapshot(db_engine, node["id"]) == before
    assert service.notifier.sent == []


LOOPBACK_ONLY = {"interfaces": [{"name": "lo", "mac_address": "00:00:00:00:00:00"}]}


@pytest.mark.parametrize("bad", [[], "x", {"inventory": []}, {"inventory": {}},
                                 {"inventory": LOOPBACK_ONLY},
                                 {"inventory": {"interfaces": [{"mac_address": "zz"}]}}])
def test_bad_bodies_are_refused(sqlite_url, tmp_path, bad):
    engine = create_engine(sqlite_url)
    service = service_for(engine, tmp_path)
    with pytest.raises(BadRequest):
        service.accept(bad)


def test_locked_node_is_busy_and_untouched(db_url, db_engine, tmp_path):
    node = _waiting(db_engine)
    service = service_for(db_engine, tmp_path)
    service.lock_attempts = 2
    conductor = create_engine(db_url)
    try:
        locking.acquire(conductor, node["id"], "conductor-1")
        with pytest.raises(NodeLocked):
            service.accept(body(DELL))
        with pytest.raises(NodeLocked):
            service.process(node["uuid"], body(DELL))
        row = node_row(db_engine, node["id"])
        assert (row.provision_state, row.reservation) == ("inspect wait", "conductor-1")
        locking.release(conductor, node["id"], "conductor-1")
    finally:
        conductor.dispose()
    service.process(node["uuid"], service.accept(body(DELL)).data)
    assert node_row(db_engine, node["id"]).provision_state == "manageable"


def _race(workers):
    """The exceptions raised by ``workers`` run at the same instant."""
    return [r for r in concurrency.race(workers, timeout=60) if isinstance(r, Exception)]


def test_concurrent_duplicate_callbacks(db_url, db_engine, tmp_path):
    node = _waiting(db_engine)
    engines = [create_engine(db_url) for _ in range(3)]
    try:
        services = [service_for(e, tmp_path / str(i), inspector={"add_ports": "all"})
                    for i, e in enumerate(engines)]
        for i, service in enumerate(services):
            service.lock_attempts, service.owner = 50, f"host-{i}"
        # The ramdisk retried (or a worker got the task twice): every callback was accepted
        # while the node waited, then all are processed at once.
        accepted = [s.accept(body(DELL)) for s in services]
        errors = _race([lambda s=s, a=a: s.process(a.node_uuid, a.data)
                        for s, a in zip(services, accepted, strict=True)])
    finally:
        for engine in engines:
            engine.dispose()
    assert errors == []
    after = snapshot(db_engine, node["id"])
    assert after["node"]["provision_state"] == "manageable"
    assert after["node"]["reservation"] is None and after["node"]["last_error"] is None
    assert len(after["inventories"]) == 1 and len(after["ports"]) == 5
    # Exactly one run processed the data; the others found the node already done.
    assert sum(len(s.notifier.denied()) for s in services) == 1


def test_concurrent_discovery_callbacks_make_one_node(db_url, db_engine, tmp_path):
    engines = [create_engine(db_url) for _ in range(3)]
    outcomes = []
    try:
        services = [service_for(e, tmp_path / str(i), auto_discovery={"enabled": True})
                    for i, e in enumerate(engines)]
        for i, service in enumerate(services):
            service.lock_attempts, service.owner = 50, f"host-{i}"

        def callback(service):
            try:
                accepted = service.accept(body("aarch64-gigabyte"))
            except NotFound:
                outcomes.append("404")
                return
            except NodeLocked:  # another callback is processing the new node right now
                outcomes.append("busy")
                return
            service.process(accepted.node_uuid, accepted.data)
            outcomes.append("processed")
        errors = _race([lambda s=s: callback(s) for s in services])
    finally:
        for engine in engines:
            engine.dispose()
    assert errors == []
    assert outcomes.count("processed") == 1
    with db_engine.connect() as conn:
        nodes = conn.execute(sa.select(Node.provision_state, Node.inspection_finished_at,
                                       Node.auto_discovered)).all()
    assert len(nodes) == 1 and nodes[0][0] == "enroll" and nodes[0][1] is not None


def test_results_are_discarded_when_the_reservation_was_taken_away(db_engine, tmp_path):
    """A worker that hung past the timeout must not overwrite the timeout's verdict."""
    node_id = _waiting(db_engine)["id"]
    service = service_for(db_engine, tmp_path)
    accepted = service.accept(body(DELL))
    before = snapshot(db_engine, node_id)
    real_run = service.pipeline.run

    def lose_reservation_then_run(session, node, *args):
        # The worker "hangs" here with the node loaded; meanwhile the timeout task, from its
        # own connection, judges it dead and fails the node.
        with db_engine.begin() as conn:
            conn.execute(sa.update(Node).where(Node.id == node_id).values(
                reservation=None, provision_state="inspect failed", last_error="timeout"))
        real_run(session, node, *args)

    service.pipeline.run = lose_reservation_then_run
    service.process(accepted.node_uuid, accepted.data)
    after = snapshot(db_engine, node_id)
    assert after["node"]["provision_state"] == "inspect failed"
    assert after["node"]["last_error"] == "timeout"
    assert after["ports"] == before["ports"] and after["inventories"] == before["inventories"]
