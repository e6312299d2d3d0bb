"""Lookup against real databases: every row of Ironic's own lookup outcome table, and more."""

import logging
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from inspection.db.models import Node
from inspection.errors import BadRequest, NotFound, UnknownMachine
from inspection.lookup import LookupData, lookup_node
from tests.integration.node_factory import add_node, set_state

MAC1, MAC2 = "11:22:33:44:55:66", "12:34:56:78:90:ab"
MAC3 = "00:11:00:11:00:11"
UNKNOWN = "66:55:44:33:22:11"
BMC1, BMC2 = "192.0.2.1", "1.2.1.2"


@pytest.fixture
def nodes(db_engine):
    node1 = add_node(db_engine, macs=[MAC1, MAC2], bmc_cache=[BMC1])
    node2 = add_node(db_engine, macs=[MAC3], bmc_cache=[BMC2])
    return node1, node2


def lookup(engine, node_uuid=None, macs=(), bmc=()):
    """Look up as the API will: validate, then query in a session; returns the node UUID."""
    data = LookupData.build(node_uuid, macs, bmc)
    with Session(engine) as session:
        return lookup_node(session, data).uuid


def test_nothing_to_look_up_is_a_bad_request(db_engine, nodes):
    with pytest.raises(BadRequest) as exc:
        lookup(db_engine)
    assert exc.value.code == 400
    # Invalid MACs and IPA's "no BMC" values count as nothing.
    with pytest.raises(BadRequest):
        lookup(db_engine, macs=["zz:zz", None, "11-22"], bmc=["0.0.0.0", "::/0"])
    with pytest.raises(BadRequest):
        lookup(db_engine, node_uuid="not-a-uuid", macs=[MAC1])


@pytest.mark.parametrize("macs", [[MAC1, MAC2], [MAC2, MAC1], [MAC1], [MAC2, UNKNOWN],
                                  [MAC1.upper().replace(":", "-")]])
def test_found_by_any_of_its_macs(db_engine, nodes, macs):
    assert lookup(db_engine, macs=macs) == nodes[0]["uuid"]


def test_lookup_by_macs_is_one_statement(db_engine, nodes):
    statements = []

    def record(_conn, _cursor, sql, *_args):
        statements.append(sql)

    sa.event.listen(db_engine, "before_cursor_execute", record)
    try:
        assert lookup(db_engine, macs=[MAC1, MAC2, UNKNOWN]) == nodes[0]["uuid"]
    finally:
        sa.event.remove(db_engine, "before_cursor_execute", record)
    assert len([s for s in statements if s.lstrip().upper().startswith("SELECT")]) == 1


def test_unknown_macs_are_an_unknown_machine(db_engine, nodes):
    with pytest.raises(UnknownMachine) as exc:
        lookup(db_engine, macs=[UNKNOWN])
    assert exc.value.code == 404


def test_node_in_another_state_is_not_found_and_not_discoverable(db_engine, nodes):
    set_state(db_engine, nodes[0]["id"], "available")
    with pytest.raises(NotFound) as exc:
        lookup(db_engine, macs=[MAC1, MAC2])
    assert not isinstance(exc.value, UnknownMachine)


def test_macs_of_two_nodes_conflict(db_engine, nodes, caplog):
    with caplog.at_level(logging.INFO), pytest.raises(NotFound) as exc:
        lookup(db_engine, macs=[MAC1, MAC3])
    assert not isinstance(exc.value, UnknownMachine)
    assert "different nodes" in caplog.text
    # The client-facing message is the same as for any other miss.
    assert str(exc.value) == NotFound.generic_message
    assert nodes[0]["uuid"] not in str(exc.value)


@pytest.mark.parametrize("macs", [[], [UNKNOWN], [MAC1]])
def test_found_by_bmc_address(db_engine, nodes, macs):
    assert lookup(db_engine, macs=macs, bmc=[BMC1, "::/0"]) == nodes[0]["uuid"]


@pytest.mark.parametrize("macs", [[], [UNKNOWN]])
def test_unknown_bmc_address_is_an_unknown_machine(db_engine, nodes, macs):
    with pytest.raises(UnknownMachine):
        lookup(db_engine, macs=macs, bmc=["192.168.1.1"])


def test_bmc_matches_only_waiting_nodes(db_engine, nodes):
    set_state(db_engine, nodes[0]["id"], "available")
    with pytest.raises(UnknownMachine):
        lookup(db_engine, bmc=[BMC1])


def test_macs_and_bmc_of_different_nodes_conflict(db_engine, nodes):
    with pytest.raises(NotFound) as exc:
        lookup(db_engine, macs=[MAC1, MAC2], bmc=[BMC2])
    assert not isinstance(exc.value, UnknownMachine)


@pytest.mark.parametrize("macs", [[], [UNKNOWN]])
def test_bmc_cached_on_two_waiting_nodes_is_not_found(db_engine, nodes, macs):
    add_node(db_engine, bmc_cache=[BMC1])
    with pytest.raises(NotFound) as exc:
        lookup(db_engine, macs=macs, bmc=[BMC1])
    assert not isinstance(exc.value, UnknownMachine)


def test_mac_decides_between_nodes_sharing_a_bmc_address(db_engine, nodes):
    add_node(db_engine, bmc_cache=[BMC1])
    assert lookup(db_engine, macs=[MAC1], bmc=[BMC1]) == nodes[0]["uuid"]


@pytest.mark.parametrize("macs", [[], [UNKNOWN]])
def test_found_by_uuid(db_engine, nodes, macs):
    assert lookup(db_engine, node_uuid=nodes[0]["uuid"], macs=macs) == nodes[0]["uuid"]


def test_uuid_decides_between_nodes_sharing_a_bmc_address(db_engine, nodes):
    other = add_node(db_engine, bmc_cache=[BMC1])
    assert lookup(db_engine, node_uuid=other["uuid"], bmc=[BMC1]) == other["uuid"]


def test_random_uuid_is_not_found(db_engine, nodes):
    with pytest.raises(NotFound) as exc:
        lookup(db_engine, node_uuid=str(uuid.uuid4()))
    assert not isinstance(exc.value, UnknownMachine)


def test_uuid_of_a_node_in_another_state_is_not_found(db_engine, nodes):
    set_state(db_engine, nodes[0]["id"], "available")
    with pytest.raises(NotFound):
        lookup(db_engine, node_uuid=nodes[0]["uuid"])


@pytest.mark.parametrize("bmc", [[], [BMC1]])
def test_uuid_of_another_node_than_the_macs_is_not_found(db_engine, nodes, bmc):
    with pytest.raises(NotFound) as exc:
        lookup(db_engine, node_uuid=nodes[1]["uuid"], macs=[MAC1, MAC2], bmc=bmc)
    assert not isinstance(exc.value, UnknownMachine)


def test_uuid_contradicted_by_another_nodes_bmc_is_not_found(db_engine, nodes):
    with pytest.raises(NotFound):
        lookup(db_engine, node_uuid=nodes[1]["uuid"], bmc=[BMC1])


def test_ipv6_bmc_address_in_any_spelling(db_engine, nodes):
    node = add_node(db_engine, bmc_cache=["2001:db8::42"])
    assert lookup(db_engine, bmc=["0.0.0.0", "2001:DB8:0:0::42"]) == node["uuid"]


def test_bmc_address_is_matched_exactly_not_as_a_substring(db_engine, nodes):
    # "192.0.2.1" is a substring of "192.0.2.10"; neither must match the other.
    node = add_node(db_engine, bmc_cache=["192.0.2.10"])
    assert lookup(db_engine, bmc=["192.0.2.10"]) == node["uuid"]
    add_node(db_engine, driver_internal_info={"other": "192.0.2.99"})
    with pytest.raises(UnknownMachine):
        lookup(db_engine, bmc=["192.0.2.99"])


def test_lookup_by_bmc_among_many_waiting_nodes_queries_only_candidates(db_engine, nodes):
    with db_engine.begin() as conn:
        conn.execute(sa.insert(Node), [
            {"uuid": str(uuid.uuid4()), "provision_state": "inspect wait",
             "driver_internal_info": {"lookup_bmc_addresses": [f"10.0.{i // 250}.{i % 250}"]}}
            for i in range(2000)])
    loaded = []

    def count_rows(_conn, _cursor, statement, *_args):
        loaded.append(statement)

    sa.event.listen(db_engine, "before_cursor_execute", count_rows)
    try:
        data = LookupData.build(bmc_addresses=["10.0.7.17"])
        with Session(db_engine) as session:
            node = lookup_node(session, data)
    finally:
        sa.event.remove(db_engine, "before_cursor_execute", count_rows)
    # One candidate query plus reading the node: no per-node queries, no full scan in Python.
    assert len(loaded) <= 3, loaded
    with db_engine.connect() as conn:
        cached = conn.execute(sa.select(Node.driver_internal_info)
                              .where(Node.uuid == node.uuid)).scalar_one()
    assert cached["lookup_bmc_addresses"] == ["10.0.7.17"]
