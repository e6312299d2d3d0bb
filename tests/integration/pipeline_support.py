"""Helpers for the pipeline tests: a recording notifier, fixtures' bodies, services, DB reads."""

import copy
import json
import pathlib

import sqlalchemy as sa

from inspection.db.models import Node, NodeInventory, NodeTrait, Port
from inspection.processing.service import InspectionService
from pxe_filter.broadcast import FilterNotifier
from tests.integration.node_factory import make_conf

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures" / "inventories"
RULES_DIR = pathlib.Path(__file__).parents[2] / "etc" / "ironic-inspection" / "rules"


class RecordingNotifier(FilterNotifier):
    """A notifier that records what it would broadcast instead of sending it."""

    def __init__(self) -> None:
        super().__init__(transport=None)
        self.sent: list[dict] = []

    def update(self, allow=(), deny=()) -> bool:
        self.sent.append({"allow": sorted(allow), "deny": sorted(deny)})
        return True

    def denied(self) -> list[list[str]]:
        return [call["deny"] for call in self.sent if call["deny"]]


def body(name: str) -> dict:
    """A full IPA callback body from tests/fixtures/inventories."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def macs_of(data: dict) -> list[str]:
    return [i["mac_address"].lower() for i in data["inventory"]["interfaces"]
            if i["name"] != "lo"]


def service_for(engine, tmp_path, notifier=None, **groups) -> InspectionService:
    """A service built by from_conf from a real configuration file."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    conf = make_conf(tmp_path, **groups)
    service = InspectionService.from_conf(conf, engine=engine,
                                          notifier=notifier or RecordingNotifier())
    service.lock_interval = 0.1
    return service


def snapshot(engine, node_id) -> dict:
    """Everything about a node a user could observe: row, ports, traits, stored inventory."""
    with engine.connect() as conn:
        row = conn.execute(sa.select(Node.__table__).where(Node.id == node_id)).one()._asdict()
        ports = sorted(tuple(r) for r in conn.execute(
            sa.select(Port.address, Port.pxe_enabled, Port.extra, Port.physical_network)
            .where(Port.node_id == node_id)))
        traits = sorted(conn.execute(sa.select(NodeTrait.trait)
                                     .where(NodeTrait.node_id == node_id)).scalars())
        inventories = conn.execute(
            sa.select(NodeInventory.inventory_data, NodeInventory.plugin_data)
            .where(NodeInventory.node_id == node_id)).all()
    return {"node": row, "ports": ports, "traits": traits,
            "inventories": [tuple(r) for r in inventories]}


def changed_fields(before: dict, after: dict) -> set[str]:
    """Node columns that differ, plus 'ports'/'traits'/'inventories' if those differ."""
    fields = {k for k in before["node"] if before["node"][k] != after["node"][k]}
    fields |= {k for k in ("ports", "traits", "inventories") if before[k] != after[k]}
    return fields


def write_rules(tmp_path, *files: str) -> str:
    """Concatenate built-in rule files from etc/ into one file; returns its path."""
    path = tmp_path / "built-in-rules.yaml"
    path.write_text("\n".join((RULES_DIR / f).read_text() for f in files))
    return str(path)


def with_copy(data: dict, **changes) -> dict:
    out = copy.deepcopy(data)
    out.update(changes)
    return out
