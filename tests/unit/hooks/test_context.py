"""The inspection context helpers: changes persist through the session, never committed."""

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from inspection.db.models import Node, NodeTrait, Port
from inspection.hooks.context import InspectionContext
from pxe_filter.common.macs import InvalidMAC
from tests.unit.hooks.helpers import make_node


def _reload(session, node_uuid):
    with Session(session.get_bind()) as fresh:
        node = fresh.scalars(select(Node).where(Node.uuid == node_uuid)).one()
        ports = list(fresh.scalars(select(Port).where(Port.node_id == node.id)))
        traits = set(fresh.scalars(select(NodeTrait.trait).where(NodeTrait.node_id == node.id)))
        return node, ports, traits


def test_changes_are_persisted_only_when_the_caller_commits(session, conf):
    node = make_node(session, properties={"a": 1, "capabilities": "x:1"},
                     ports=[("52:54:00:00:00:01", True)])
    session.commit()
    ctx = InspectionContext.load(session, node, {}, {}, conf)
    ctx.edit.set_property("cpu_arch", "x86_64")
    ctx.edit.remove_property("a")
    ctx.edit.update_capabilities({"boot_mode": "uefi"})
    ctx.edit.add_trait("CUSTOM_GPU")
    ctx.edit.add_trait("CUSTOM_GPU")
    port = ctx.edit.create_port("52:54:00:AA:BB:CC", pxe_enabled=False, extra={"k": "v"})
    ctx.edit.update_port_dict(ctx.edit.find_port("52:54:00:00:00:01"), "local_link_connection",
                         {"port_id": "Eth1"})
    assert ctx.edit.find_port(port.uuid) is port
    assert ctx.edit.traits() == ["CUSTOM_GPU"]

    stored, ports, traits = _reload(session, node.uuid)
    assert stored.properties == {"a": 1, "capabilities": "x:1"}  # nothing committed yet
    assert len(ports) == 1 and traits == set()

    session.commit()
    stored, ports, traits = _reload(session, node.uuid)
    assert stored.properties == {"capabilities": "x:1,boot_mode:uefi", "cpu_arch": "x86_64"}
    assert {(p.address, p.pxe_enabled) for p in ports} == {("52:54:00:00:00:01", True),
                                                           ("52:54:00:aa:bb:cc", False)}
    assert next(p for p in ports if p.pxe_enabled).local_link_connection == {"port_id": "Eth1"}
    assert traits == {"CUSTOM_GPU"}

    ctx.edit.remove_trait("CUSTOM_GPU")
    ctx.edit.delete_port(port)
    session.commit()
    _, ports, traits = _reload(session, node.uuid)
    assert [p.address for p in ports] == ["52:54:00:00:00:01"] and traits == set()


def test_new_node_gets_an_id_when_it_needs_one(session, conf):
    node = Node(uuid="8e5d5b5c-0d4c-4f5e-9a3b-3c2b1a0f9e8d", properties={})
    ctx = InspectionContext.load(session, node, {}, {}, conf)
    assert ctx.edit.ports == [] and ctx.previous_inventory is None
    ctx.edit.create_port("52:54:00:00:00:02")
    session.commit()
    assert _reload(session, node.uuid)[1][0].node_id == node.id


@pytest.mark.parametrize("trait", ["custom_gpu", "CUSTOM GPU", "", "X" * 256, 5])
def test_invalid_traits_are_refused(session, conf, trait):
    ctx = InspectionContext.load(session, make_node(session), {}, {}, conf)
    with pytest.raises(ValueError, match="invalid trait"):
        ctx.edit.add_trait(trait)


def test_invalid_port_mac_is_refused(session, conf):
    ctx = InspectionContext.load(session, make_node(session), {}, {}, conf)
    with pytest.raises(InvalidMAC):
        ctx.edit.create_port("../etc/passwd")
    assert ctx.edit.port_by_address("not a mac") is None
