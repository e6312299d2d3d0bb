"""Helpers for lookup/discovery/locking tests: configurations and nodes written to a real DB."""

import uuid

import sqlalchemy as sa
from oslo_config import cfg

from inspection import bmc
from inspection import conf as inspection_conf
from inspection.db.models import Node, Port


def make_conf(tmp_path, **groups) -> cfg.ConfigOpts:
    """A configuration from a real file: ``make_conf(p, auto_discovery={"enabled": True})``."""
    path = tmp_path / "inspection.conf"
    text = ""
    for group, options in groups.items():
        text += f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in options.items())
    path.write_text(text)
    conf = cfg.ConfigOpts()
    inspection_conf.register_opts(conf)
    conf(args=["--config-file", str(path)], default_config_files=[], default_config_dirs=[])
    return conf


def add_node(engine, state="inspect wait", macs=(), bmc_cache=None, **columns) -> dict:
    """Insert a node with ports; returns {"id", "uuid"}."""
    node_uuid = columns.pop("uuid", None) or str(uuid.uuid4())
    internal = dict(columns.pop("driver_internal_info", {}))
    if bmc_cache is not None:
        internal[bmc.CACHE_KEY] = list(bmc_cache)
    with engine.begin() as conn:
        node_id = conn.execute(sa.insert(Node).values(
            uuid=node_uuid, provision_state=state, driver=columns.pop("driver", "ipmi"),
            driver_internal_info=internal, **columns)).inserted_primary_key[0]
        if macs:
            conn.execute(sa.insert(Port), [
                {"uuid": str(uuid.uuid4()), "address": mac, "node_id": node_id}
                for mac in macs])
    return {"id": node_id, "uuid": node_uuid}


def node_row(engine, node_id):
    """The node's row as read by a fresh connection."""
    with engine.connect() as conn:
        return conn.execute(sa.select(Node.__table__).where(Node.id == node_id)).one()


def set_state(engine, node_id, state) -> None:
    """Change a node's provision state behind the code under test's back."""
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.id == node_id).values(provision_state=state))
