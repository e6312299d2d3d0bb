"""A scoped filter on a database made by Ironic 39's own ironic-dbsync (read-only).

Ironic's schema is the judge of the column names and types the scope reads
(``nodes.conductor_group``, ``nodes.shard``); rows are written as Ironic stores them.
"""

import uuid

import pytest
import sqlalchemy as sa

from pxe_filter.common.database import create_engine
from tests.support.daemon import run_filter
from tests.support.ironic import Ironic

pytestmark = pytest.mark.slow

IN1, IN2, OUT1, OUT2 = "52:54:00:ec:00:01", "52:54:00:ec:00:02", "52:54:00:ec:00:03", \
    "52:54:00:ec:00:04"
ALLOW, DENY = "{}\n", "{},ignore\n"


@pytest.fixture(scope="module")
def ironic_db(tmp_path_factory):
    """Ironic's schema in an SQLite file, with nodes in conductor groups rack1 and ''."""
    workdir = tmp_path_factory.mktemp("ironic-scope")
    url = f"sqlite:///{workdir / 'ironic.sqlite'}"
    Ironic(workdir, url, "fake://").create_schema()  # no bus: only the schema
    engine = create_engine(url)
    nodes = sa.table("nodes", sa.column("id"), sa.column("uuid"), sa.column("driver"),
                     sa.column("provision_state"), sa.column("inspect_interface"),
                     sa.column("conductor_group"), sa.column("shard"))
    ports = sa.table("ports", sa.column("uuid"), sa.column("address"), sa.column("node_id"))
    rows = [(1, "inspect wait", "rack1", "s1", IN1), (2, "active", "rack1", None, IN2),
            (3, "inspect wait", "", "s1", OUT1), (4, "inspecting", "rack2", None, OUT2)]
    with engine.begin() as conn:
        for node_id, state, group, shard, mac in rows:
            conn.execute(sa.insert(nodes).values(
                id=node_id, uuid=str(uuid.uuid4()), driver="fake-hardware",
                provision_state=state, inspect_interface="agent", conductor_group=group,
                shard=shard))
            conn.execute(sa.insert(ports).values(uuid=str(uuid.uuid4()), address=mac,
                                                 node_id=node_id))
    engine.dispose()
    return url


@pytest.mark.parametrize(("options", "expected"), [
    ({"conductor_groups": "rack1"},
     {IN1: ALLOW, IN2: DENY, OUT1: DENY, OUT2: DENY}),
    ({"conductor_groups": "rack1", "out_of_scope": "wildcard"}, {IN1: ALLOW, IN2: DENY}),
    ({"conductor_groups": "<default>, rack1", "shards": "s1", "out_of_scope": "wildcard"},
     {IN1: ALLOW, OUT1: ALLOW}),
    ({"shards": "<none>"}, {IN1: DENY, IN2: DENY, OUT1: DENY, OUT2: ALLOW}),
], ids=["rack1-deny", "rack1-wildcard", "default-and-rack1-in-s1", "unsharded"])
def test_scoped_once_on_ironic_schema(ironic_db, tmp_path, options, expected):
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    result = run_filter(tmp_path, ironic_db, hostsdir, "--once",
                        extra_conf={"pxe_filter": options})
    assert result.returncode == 0, result.stderr
    found = {p.name: p.read_text() for p in hostsdir.iterdir()
             if not p.name.startswith(".") and p.name != "unknown_hosts_filter"}
    assert found == {mac: text.format(mac) for mac, text in expected.items()}
    assert (hostsdir / "unknown_hosts_filter").read_text() == "*:*:*:*:*:*\n"
