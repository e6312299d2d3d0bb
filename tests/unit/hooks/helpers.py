"""Helpers for hook tests: fixtures data, a configuration, a context on a node."""

import copy
import json
import pathlib
import uuid

from oslo_config import cfg

from inspection import conf as inspection_conf
from inspection.db.models import INSPECT_WAIT, Node, Port
from inspection.hooks.base import load_hooks, run_hooks, run_preprocess
from inspection.hooks.context import InspectionContext

FIXTURES = pathlib.Path(__file__).parents[2] / "fixtures" / "inventories"


def load_data(name: str) -> dict:
    """A whole ramdisk callback body from tests/fixtures/inventories (a fresh copy)."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def split(data: dict) -> tuple[dict, dict]:
    """(inventory, plugin data) the way the API splits a callback body."""
    data = copy.deepcopy(data)
    return data.pop("inventory"), data


def make_conf(tmp_path, **inspector) -> cfg.ConfigOpts:
    """A ConfigOpts loaded from a config file holding the given [inspector] options."""
    lines = ["[inspector]"]
    for key, value in inspector.items():
        if isinstance(value, list):
            lines += [f"{key} = {item}" for item in value]
        else:
            lines.append(f"{key} = {value}")
    path = tmp_path / f"inspection-{uuid.uuid4().hex[:8]}.conf"
    path.write_text("\n".join(lines) + "\n")
    conf = cfg.ConfigOpts()
    inspection_conf.register_opts(conf)
    conf(args=["--config-file", str(path)], project="ironic", default_config_files=[],
         default_config_dirs=[])
    return conf


def make_node(session, properties=None, ports=(), **fields) -> Node:
    """A node in `inspect wait` with ports ``[(mac, pxe_enabled), ...]``, flushed."""
    node = Node(uuid=str(uuid.uuid4()), driver="ipmi", provision_state=INSPECT_WAIT,
                properties=dict(properties or {}), driver_info={}, driver_internal_info={},
                extra={}, instance_info={}, **fields)
    session.add(node)
    session.flush()
    for mac, pxe in ports:
        session.add(Port(uuid=str(uuid.uuid4()), address=mac, node_id=node.id,
                         pxe_enabled=pxe, extra={}, local_link_connection={},
                         internal_info={}))
    session.flush()
    return node


def make_ctx(session, conf, data, *, properties=None, ports=(), previous_inventory=None,
             node=None) -> InspectionContext:
    """A context on a (new) node for a callback body."""
    node = node or make_node(session, properties, ports)
    inventory, plugin_data = split(data)
    ctx = InspectionContext.load(session, node, inventory, plugin_data, conf)
    if previous_inventory is not None:
        ctx.previous_inventory = previous_inventory
    return ctx


def run(ctx, names) -> None:
    """Load hooks by name with ctx.conf and run both phases, as the pipeline will."""
    hooks = load_hooks(ctx.conf, names)
    run_preprocess(hooks, ctx)
    run_hooks(hooks, ctx)
