"""Starting and aborting inspection: state, BMC cache, reservations and broadcasts."""

import pytest
from sqlalchemy.orm import Session

from inspection import attempts, bmc, locking
from inspection.db.models import utcnow
from inspection.errors import NodeLocked, NotFound, UnknownMachine
from inspection.inspect_control import abort_inspection, start_inspection
from inspection.lookup import LookupData, lookup_node
from inspection.reservation import find_node_id
from inspection.states import TransitionRefused
from pxe_filter.broadcast import FilterNotifier
from tests.integration.filter_listener import listener  # noqa: F401 - fixture
from tests.integration.node_factory import add_node, make_conf, node_row

MACS = ["52:54:00:00:30:01", "52:54:00:00:30:02"]
DRIVER_INFO = {"ipmi_address": "bmc-r1.example.test", "ipmi_username": "admin",
               "redfish_address": "https://[2001:db8::42]/redfish/v1",
               "ipmi_target_address": "0x82"}
#: No BMC is driven for fake-hardware: its driver_info only feeds lookup.
LAB = {"driver": "fake-hardware", "driver_info": DRIVER_INFO}
RESOLVED = {"bmc-r1.example.test": ["192.0.2.21", "127.0.0.1"]}


def resolver(name):
    return RESOLVED.get(name, [])


@pytest.fixture
def conf(tmp_path):
    return make_conf(tmp_path, DEFAULT={"host": "inspection-1"})


def lookup(engine, **kwargs):
    with Session(engine) as session:
        return lookup_node(session, LookupData.build(**kwargs)).uuid


def test_start_caches_bmc_addresses_and_waits(db_engine, conf):
    node = add_node(db_engine, state="manageable", macs=MACS, **LAB,
                    driver_internal_info={"agent_url": "http://x"}, last_error="old",
                    name="rack1-node1")
    before = utcnow().replace(microsecond=0)
    returned = start_inspection(db_engine, conf, "rack1-node1", FilterNotifier(None), resolver)
    assert (returned.uuid, returned.provision_state) == (node["uuid"], "inspect wait")
    assert returned.reservation is None
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "inspect wait"
    assert row.target_provision_state == "manageable"
    assert row.inspection_started_at >= before
    assert row.last_error is None and row.reservation is None
    info = dict(row.driver_internal_info)
    assert len(info.pop(attempts.KEY)) == 36  # a new inspection attempt
    assert info == {
        "agent_url": "http://x",
        bmc.CACHE_KEY: ["192.0.2.21", "2001:db8::42", "bmc-r1.example.test"]}
    # The ramdisk can now be found by either reported BMC address.
    assert lookup(db_engine, bmc_addresses=["192.0.2.21"]) == node["uuid"]
    assert lookup(db_engine, bmc_addresses=["0.0.0.0", "2001:db8::42"]) == node["uuid"]


def test_start_broadcasts_allow_and_abort_broadcasts_deny(db_engine, conf, listener):  # noqa: F811
    notifier, endpoint = listener
    node = add_node(db_engine, state="inspect failed", macs=MACS, **LAB,
                    inspect_interface="agent")
    start_inspection(db_engine, conf, node["uuid"], notifier, resolver)
    assert endpoint.wait_for(lambda calls: calls) == [{"allow": MACS, "deny": []}]
    endpoint.reset()
    abort_inspection(db_engine, conf, node["uuid"], notifier)
    assert endpoint.wait_for(lambda calls: calls) == [{"allow": [], "deny": MACS}]


def test_abort_fails_the_node_and_clears_the_cache(db_engine, conf):
    node = add_node(db_engine, state="manageable", macs=MACS, **LAB)
    start_inspection(db_engine, conf, node["uuid"], FilterNotifier(None), resolver)
    abort_inspection(db_engine, conf, node["uuid"], FilterNotifier(None))
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "inspect failed"
    assert row.target_provision_state is None and row.reservation is None
    assert "aborted" in row.last_error
    assert bmc.CACHE_KEY not in row.driver_internal_info
    with pytest.raises(UnknownMachine):
        lookup(db_engine, bmc_addresses=["192.0.2.21"])
    with pytest.raises(NotFound):
        lookup(db_engine, macs=MACS)


@pytest.mark.parametrize("state", ["active", "available", "enroll", "inspect wait"])
def test_start_refused_in_other_states(db_engine, conf, state):
    node = add_node(db_engine, state=state, **LAB)
    with pytest.raises(TransitionRefused) as exc:
        start_inspection(db_engine, conf, node["uuid"], FilterNotifier(None), resolver)
    # Ironic's status and wording for a provision action in the wrong state.
    assert exc.value.code == 400
    assert str(exc.value) == (f'The requested action "inspect" can not be performed on node '
                              f'"{node["uuid"]}" while it is in state "{state}".')
    row = node_row(db_engine, node["id"])
    assert (row.provision_state, row.reservation) == (state, None)
    assert bmc.CACHE_KEY not in row.driver_internal_info


@pytest.mark.parametrize("state", ["manageable", "inspect failed", "active"])
def test_abort_refused_unless_waiting(db_engine, conf, state):
    node = add_node(db_engine, state=state)
    with pytest.raises(TransitionRefused):
        abort_inspection(db_engine, conf, node["uuid"], FilterNotifier(None))
    assert node_row(db_engine, node["id"]).provision_state == state


def test_locked_node_is_busy_and_untouched(db_engine, conf):
    node = add_node(db_engine, state="manageable", **LAB)
    locking.acquire(db_engine, node["id"], "ironic-conductor-3")
    with pytest.raises(NodeLocked):
        start_inspection(db_engine, conf, node["uuid"], FilterNotifier(None), resolver)
    row = node_row(db_engine, node["id"])
    assert (row.provision_state, row.reservation) == ("manageable", "ironic-conductor-3")


@pytest.mark.parametrize("ident", ["no-such-node", "6f0c3d6e-6b7a-4a47-9a43-000000000000"])
def test_unknown_node(db_engine, conf, ident):
    with pytest.raises(NotFound) as exc:
        start_inspection(db_engine, conf, ident, FilterNotifier(None), resolver)
    assert exc.value.code == 404 and ident in str(exc.value)


def test_a_node_is_found_by_its_uuid_in_any_spelling(db_engine):
    node = add_node(db_engine, state="manageable", name="spelled")
    assert find_node_id(db_engine, node["uuid"].upper()) == node["id"]
    assert find_node_id(db_engine, node["uuid"].replace("-", "")) == node["id"]
    assert find_node_id(db_engine, "spelled") == node["id"]
