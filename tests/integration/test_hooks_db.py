"""The default hooks + ports + root-device against real databases, committed and re-read."""

import json
import pathlib
import uuid

import pytest
from oslo_config import cfg
from sqlalchemy import select
from sqlalchemy.orm import sessionmaker

from inspection import conf as inspection_conf
from inspection.db.engine import session_scope
from inspection.db.models import INSPECT_WAIT, Node, NodeInventory, Port
from inspection.hooks.base import InspectionHookError, load_hooks, run_hooks, run_preprocess
from inspection.hooks.context import InspectionContext

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures" / "inventories"
OTHER_NODE_MAC = "3c:fd:fe:a1:77:e1"


def _conf(tmp_path, **inspector) -> cfg.ConfigOpts:
    path = tmp_path / "inspection.conf"
    path.write_text("[inspector]\n" + "".join(f"{k} = {v}\n" for k, v in inspector.items()))
    conf = cfg.ConfigOpts()
    inspection_conf.register_opts(conf)
    conf(args=["--config-file", str(path)], default_config_files=[], default_config_dirs=[])
    return conf


def _callback(name):
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    return data.pop("inventory"), data


@pytest.fixture
def factory(db_engine):
    return sessionmaker(db_engine, expire_on_commit=False)


def _enroll(factory, ports=(), properties=None) -> str:
    node_uuid = str(uuid.uuid4())
    with session_scope(factory) as session:
        node = Node(uuid=node_uuid, driver="ipmi", provision_state=INSPECT_WAIT,
                    properties=properties or {}, driver_info={}, driver_internal_info={},
                    extra={}, instance_info={})
        session.add(node)
        session.flush()
        for mac, pxe in ports:
            session.add(Port(uuid=str(uuid.uuid4()), address=mac, node_id=node.id,
                             pxe_enabled=pxe, extra={}, local_link_connection={},
                             internal_info={}))
    return node_uuid


def _inspect(factory, conf, node_uuid, inventory, plugin_data):
    hooks = load_hooks(conf)
    with session_scope(factory) as session:
        node = session.scalars(select(Node).where(Node.uuid == node_uuid)).one()
        ctx = InspectionContext.load(session, node, inventory, plugin_data, conf)
        run_preprocess(hooks, ctx)
        run_hooks(hooks, ctx)
        return ctx


def _stored(factory, node_uuid):
    with factory() as session:
        node = session.scalars(select(Node).where(Node.uuid == node_uuid)).one()
        ports = {p.address: (p.pxe_enabled, p.extra)
                 for p in session.scalars(select(Port).where(Port.node_id == node.id))}
        return node.properties, ports


def test_dell_inspection_is_stored(db_engine, factory, tmp_path):
    conf = _conf(tmp_path, hooks="$default_hooks,memory,cpus,boot-mode,root-device",
                 add_ports="active", keep_ports="present")
    # A port from an older inventory (gone now), one still present but with stale PXE, and
    # one MAC of the inventory that belongs to another node.
    node_uuid = _enroll(factory, ports=[("52:54:00:00:00:99", True),
                                        ("b0:7b:25:d3:0a:11", True)])
    other = _enroll(factory, ports=[(OTHER_NODE_MAC, True)])
    inventory, plugin_data = _callback("uefi-dell-r640")
    inventory["interfaces"][4]["ipv4_address"] = "192.0.2.99"  # ens1f1 is now active too

    ctx = _inspect(factory, conf, node_uuid, inventory, plugin_data)

    properties, ports = _stored(factory, node_uuid)
    assert properties == {"cpu_arch": "x86_64", "memory_mb": 196608, "cpus": 80,
                          "capabilities": "boot_mode:uefi", "local_gb": 445}
    assert ports == {"b0:7b:25:d3:0a:10": (True, {}), "b0:7b:25:d3:0a:11": (False, {}),
                     "b0:7b:25:d3:0a:1e": (False, {})}
    assert _stored(factory, other)[1] == {OTHER_NODE_MAC: (True, {})}
    assert ctx.plugin_data["valid_interfaces"]["eno1"]["is_added"] is True
    assert ctx.plugin_data["valid_interfaces"]["eno2"]["is_added"] is False


def test_failed_hook_leaves_the_database_as_it_was(db_engine, factory, tmp_path):
    conf = _conf(tmp_path, hooks="$default_hooks,root-device", add_ports="all",
                 keep_ports="present")
    node_uuid = _enroll(factory, ports=[("52:54:00:00:00:99", True)],
                        properties={"root_device": {"serial": "no-such-disk"}})
    inventory, plugin_data = _callback("uefi-dell-r640")
    with pytest.raises(InspectionHookError, match="root-device hook: no disk satisfies"):
        _inspect(factory, conf, node_uuid, inventory, plugin_data)
    # Ports were created and deleted, cpu_arch set, before the failure: all rolled back.
    assert _stored(factory, node_uuid) == ({"root_device": {"serial": "no-such-disk"}},
                                           {"52:54:00:00:00:99": (True, {})})


def test_raid_device_uses_the_stored_inventory(db_engine, factory, tmp_path):
    conf = _conf(tmp_path, hooks="$default_hooks,raid-device,root-device")
    node_uuid = _enroll(factory)
    before, plugin_data = _callback("aarch64-gigabyte")
    with session_scope(factory) as session:
        node = session.scalars(select(Node).where(Node.uuid == node_uuid)).one()
        session.add(NodeInventory(node_id=node.id, inventory_data=before, plugin_data={}))
    after = json.loads(json.dumps(before))
    after["disks"].append({"name": "/dev/md126", "size": 1800 * 1024 ** 3,
                           "serial": "md-raid1-a1b2c3", "rotational": False})

    _inspect(factory, conf, node_uuid, after, plugin_data)

    properties, ports = _stored(factory, node_uuid)
    assert properties["root_device"] == {"serial": "md-raid1-a1b2c3"}
    assert properties["local_gb"] == 1799
    assert properties["cpu_arch"] == "aarch64"
    assert ports == {"e8:eb:d3:4f:90:2a": (True, {})}
