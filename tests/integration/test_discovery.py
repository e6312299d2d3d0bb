"""Auto-discovery on every backend, including callbacks racing from separate connections."""


import pytest
import sqlalchemy as sa

from inspection.db.models import Node, Port
from inspection.discovery import lookup_or_discover
from inspection.errors import NotFound, UnknownMachine
from inspection.lookup import LookupData
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import add_node, make_conf
from tests.support import concurrency

MACS = ["52:54:00:00:10:01", "52:54:00:00:10:02", "52:54:00:00:10:03"]


@pytest.fixture
def conf(tmp_path):
    return make_conf(tmp_path, auto_discovery={"enabled": True, "driver": "redfish",
                                               "inspection_scope": "rack-7"})


def nodes_and_ports(engine):
    with engine.connect() as conn:
        nodes = conn.execute(sa.select(Node.__table__)).all()
        ports = conn.execute(sa.select(Port.address, Port.node_id, Port.pxe_enabled)).all()
    return nodes, ports


def test_unknown_machine_is_enrolled(db_engine, conf):
    data = LookupData.build(macs=[m.upper() for m in MACS], bmc_addresses=["192.0.2.50"])
    found = lookup_or_discover(db_engine, conf, data, pxe_mac=MACS[1])
    assert found.created
    nodes, ports = nodes_and_ports(db_engine)
    assert len(nodes) == 1
    node = nodes[0]
    assert (node.uuid, node.id) == (found.node_uuid, found.node_id)
    assert node.auto_discovered is True or node.auto_discovered == 1
    assert node.driver == "redfish" and node.provision_state == "enroll"
    assert node.inspect_interface == "agent"
    assert node.properties == {"inspection_scope": "rack-7"}
    assert node.reservation is None
    assert sorted(ports) == [(MACS[0], node.id, False), (MACS[1], node.id, True),
                             (MACS[2], node.id, False)]


def test_no_scope_option_means_no_scope_property(db_engine, tmp_path):
    conf = make_conf(tmp_path, auto_discovery={"enabled": True})
    lookup_or_discover(db_engine, conf, LookupData.build(macs=MACS[:1]))
    nodes, ports = nodes_and_ports(db_engine)
    assert nodes[0].properties == {} and nodes[0].driver == "fake-hardware"
    assert ports == [(MACS[0], nodes[0].id, True)]


def test_disabled_discovery_creates_nothing(db_engine, tmp_path):
    with pytest.raises(UnknownMachine):
        lookup_or_discover(db_engine, make_conf(tmp_path), LookupData.build(macs=MACS))
    assert nodes_and_ports(db_engine) == ([], [])


def test_known_machine_is_looked_up_not_enrolled(db_engine, conf):
    node = add_node(db_engine, macs=MACS[:1])
    found = lookup_or_discover(db_engine, conf, LookupData.build(macs=MACS))
    assert (found.node_uuid, found.created) == (node["uuid"], False)
    assert len(nodes_and_ports(db_engine)[0]) == 1


def test_known_machine_in_another_state_is_never_discovered_again(db_engine, conf):
    add_node(db_engine, state="available", macs=MACS[:1])
    with pytest.raises(NotFound) as exc:
        lookup_or_discover(db_engine, conf, LookupData.build(macs=MACS))
    assert not isinstance(exc.value, UnknownMachine)
    assert len(nodes_and_ports(db_engine)[0]) == 1


def test_a_second_callback_after_enrollment_gets_not_found(db_engine, conf):
    lookup_or_discover(db_engine, conf, LookupData.build(macs=MACS))
    with pytest.raises(NotFound):
        lookup_or_discover(db_engine, conf, LookupData.build(macs=MACS))
    assert len(nodes_and_ports(db_engine)[0]) == 1


def test_machine_without_macs_is_not_enrolled(db_engine, conf):
    with pytest.raises(NotFound):
        lookup_or_discover(db_engine, conf, LookupData.build(bmc_addresses=["192.0.2.8"]))
    assert nodes_and_ports(db_engine) == ([], [])


def test_concurrent_callbacks_from_one_machine_create_one_node(db_url, db_engine, conf):
    # Each callback has its own engine (its own connection and transaction), as separate
    # API processes would; the MAC order differs between callbacks, as it may between
    # inventories.
    contenders = 6
    with concurrency.engines(db_url, contenders) as engines:
        results = concurrency.race([
            lambda e=e, i=i: lookup_or_discover(
                e, conf, LookupData.build(macs=MACS[i % 3:] + MACS[:i % 3]))
            for i, e in enumerate(engines)])
    created = [r for r in results if not isinstance(r, Exception) and r.created]
    refused = [r for r in results if isinstance(r, NotFound)]
    assert len(created) == 1 and len(refused) == contenders - 1, results
    assert all(not isinstance(r, UnknownMachine) for r in refused)
    nodes, ports = nodes_and_ports(db_engine)
    assert [n.uuid for n in nodes] == [created[0].node_uuid]
    assert sorted(p.address for p in ports) == MACS


def test_different_machines_enroll_concurrently(db_url, db_engine, conf):
    contenders = 4
    with concurrency.engines(db_url, contenders) as engines:
        results = concurrency.race([
            lambda e=e, i=i: lookup_or_discover(
                e, conf, LookupData.build(macs=[f"52:54:00:00:20:{i:02x}"]))
            for i, e in enumerate(engines)])
    assert all(not isinstance(r, Exception) and r.created for r in results), results
    assert len(nodes_and_ports(db_engine)[0]) == contenders


def test_losing_the_enrollment_race_finds_the_winners_node(db_url, db_engine, conf, caplog):
    """The other callback commits between our lookup and our insert: deterministic race."""
    winner_engine = create_engine(db_url)
    winner: list = []

    def before_insert(_conn, _cursor, statement, *_args):
        if statement.startswith("INSERT INTO nodes") and not winner:
            # Runs in another connection and commits before our transaction inserts.
            winner.append(lookup_or_discover(winner_engine, conf,
                                             LookupData.build(macs=MACS[1:2])))

    sa.event.listen(db_engine, "before_cursor_execute", before_insert)
    try:
        with caplog.at_level("INFO", logger="inspection.discovery"), \
                pytest.raises(NotFound) as exc:
            lookup_or_discover(db_engine, conf, LookupData.build(macs=MACS))
    finally:
        sa.event.remove(db_engine, "before_cursor_execute", before_insert)
        winner_engine.dispose()
    assert not isinstance(exc.value, UnknownMachine)
    assert "another callback enrolled" in caplog.text
    nodes, ports = nodes_and_ports(db_engine)
    assert [n.uuid for n in nodes] == [winner[0].node_uuid]
    assert [p.address for p in ports] == [MACS[1]]
