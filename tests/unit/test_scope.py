"""One filter per provisioning network: the scope decides, in SQL, in policy and everywhere."""

import uuid

import pytest
import sqlalchemy as sa
from oslo_config import cfg

from inspection.db.models import Node, Port
from pxe_filter import conf as filter_conf
from pxe_filter import policy
from pxe_filter.common.database import DatabaseError, create_engine
from pxe_filter.hostsdir import WILDCARD, WILDCARD_MAC
from pxe_filter.notifications.follower import NotificationFollower
from pxe_filter.policy import Settings
from pxe_filter.source import DatabaseSource, PortView, snapshot_queries
from pxe_filter.sync import FilterSync
from tests.support.memory_source import MemorySource

IN1, IN2, OUT1, OUT2, LOOSE = (f"52:54:00:00:aa:0{n}" for n in range(1, 6))
ALLOW, DENY = "{}\n", "{},ignore\n"
RACK1 = policy.Scope.from_options(["Rack1"], [])
RACK1_WILDCARD = policy.Scope.from_options(["rack1"], [], policy.OUT_OF_SCOPE_WILDCARD)


def add_node(engine, state, macs, group="", shard=None):
    """A node (agent inspection) with one port per MAC; its UUID."""
    node_uuid = str(uuid.uuid4())
    with engine.begin() as conn:
        node_id = conn.execute(sa.insert(Node).values(
            uuid=node_uuid, provision_state=state, inspect_interface="agent",
            conductor_group=group, shard=shard)).inserted_primary_key[0]
        for mac in macs:
            conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), address=mac,
                                                node_id=node_id))
    return node_uuid


def files(hosts):
    return {p.name: p.read_text() for p in hosts.iterdir() if not p.name.startswith(".")}


# -- the scope itself ------------------------------------------------------------------
def test_options_spell_the_default_group_and_no_shard():
    scope = policy.Scope.from_options(["<default>", "Rack1"], ["<none>", "s1"])
    assert scope.conductor_groups == {"", "rack1"}
    assert scope.shards == {None, "s1"}
    assert scope.contains("", None) and scope.contains("rack1", "s1")
    assert not scope.contains("rack2", None) and not scope.contains("", "s2")
    assert "conductor groups <default>, rack1 and shards <none>, s1" in scope.describe()
    assert policy.Scope.from_options(["<DEFAULT>"], ["<None>"]).contains("", None)


def test_empty_lists_mean_no_scope():
    scope = policy.Scope.from_options([], [])
    assert not scope.scoped and scope == policy.UNSCOPED
    assert scope.contains("anything", "any") and scope.describe() == "every node (no scope)"


def test_both_options_must_match():
    scope = policy.Scope.from_options(["rack1"], ["s1"])
    assert scope.contains("rack1", "s1")
    assert not scope.contains("rack1", "s2") and not scope.contains("rack2", "s1")


def test_pxe_allowed_refuses_a_node_outside_the_scope():
    assert policy.pxe_allowed("inspect wait", "agent", {"agent"}, scope=RACK1,
                              conductor_group="rack1")
    assert not policy.pxe_allowed("inspect wait", "agent", {"agent"}, scope=RACK1,
                                  conductor_group="rack2")
    assert not policy.pxe_allowed("inspect wait", "agent", {"agent"}, scope=RACK1)


def test_port_verdict_leaves_out_of_scope_ports_to_the_wildcard_only_in_wildcard_mode():
    def verdict(group, scope):
        return Settings(scope=scope).verdict(PortView("n", "inspect wait", "agent", group))
    assert verdict("rack1", RACK1)
    assert verdict("rack2", RACK1) is False
    assert verdict("rack2", RACK1_WILDCARD) is None


@pytest.mark.parametrize("value", ["a'b", 'a"b', "a\\b"])
def test_names_with_quotes_or_backslashes_are_refused(tmp_path, value):
    path = tmp_path / "filter.conf"
    path.write_text(f"[pxe_filter]\nconductor_groups = {value}\n")
    conf = cfg.ConfigOpts()
    filter_conf.register_opts(conf)
    conf(["--config-file", str(path)])
    with pytest.raises(ValueError):
        conf.pxe_filter.conductor_groups  # noqa: B018 - reading validates


# -- the source, on SQLite --------------------------------------------------------------
@pytest.fixture
def racks(engine):
    """In scope (rack1): IN1 on inspection, IN2 active; out: OUT1 on inspection (rack2),
    OUT2 on inspection (default group)."""
    return {"in": add_node(engine, "inspect wait", [IN1], "rack1"),
            "in-active": add_node(engine, "active", [IN2], "rack1"),
            "out": add_node(engine, "inspect wait", [OUT1], "rack2"),
            "default": add_node(engine, "inspecting", [OUT2], "")}


def test_snapshot_deny_mode_reads_every_port_and_serves_only_the_scope(engine, racks):
    snap = DatabaseSource(engine).read_snapshot(["agent"], RACK1)
    assert snap.on_inspection == {IN1}
    assert snap.others == {IN2, OUT1, OUT2}


def test_snapshot_wildcard_mode_reads_only_in_scope_ports(engine, racks):
    snap = DatabaseSource(engine).read_snapshot(["agent"], RACK1_WILDCARD)
    assert snap.on_inspection == {IN1}
    assert snap.others == {IN2}


def test_the_default_group_and_shards_in_sql(engine, racks):
    add_node(engine, "inspect wait", [LOOSE], "rack1", "s1")
    source = DatabaseSource(engine)
    default = policy.Scope.from_options(["<default>"], [], "wildcard")
    assert source.read_snapshot(["agent"], default).on_inspection == {OUT2}
    sharded = policy.Scope.from_options([], ["s1"], "wildcard")
    assert source.read_snapshot(["agent"], sharded).on_inspection == {LOOSE}
    unsharded = policy.Scope.from_options(["rack1"], ["<none>"], "wildcard")
    snap = source.read_snapshot(["agent"], unsharded)
    assert (snap.on_inspection, snap.others) == ({IN1}, {IN2})


def test_lookups_carry_group_and_shard_and_never_read_them_unscoped(engine, racks):
    """An unscoped filter keeps needing SELECT on its few columns only (both are unread)."""
    source = DatabaseSource(engine)
    found = source.lookup([IN1, OUT1, LOOSE], supported_interfaces=["agent"], scope=RACK1)
    assert {mac: (view.conductor_group, view.shard) for mac, view in found.ports.items()} \
        == {IN1: ("rack1", None), OUT1: ("rack2", None)}
    assert found.any_served
    statements = []
    sa.event.listen(engine, "before_cursor_execute",
                    lambda *args: statements.append(args[2]))
    source.lookup([IN1], [racks["in"]], ["p"], supported_interfaces=["agent"])
    assert statements and not any("conductor_group" in s or "shard" in s for s in statements)
    # The full sync runs through the raw cursor, which the event does not see.
    queries = " ".join(map(str, snapshot_queries(policy.UNSCOPED)))
    assert "conductor_group" not in queries and "shard" not in queries


def test_any_served_counts_only_in_scope_nodes(engine):
    add_node(engine, "inspect wait", [OUT1], "rack2")
    source = DatabaseSource(engine)
    assert source.lookup(supported_interfaces=["agent"]).any_served
    assert not source.lookup(supported_interfaces=["agent"], scope=RACK1).any_served


# -- the full sync and broadcasts ---------------------------------------------------------
def test_wildcard_mode_writes_no_file_for_out_of_scope_ports(engine, hosts, racks):
    sync = FilterSync(DatabaseSource(engine), str(hosts), Settings(scope=RACK1_WILDCARD))
    result = sync.full_sync()
    found = files(hosts)
    assert found.pop(IN1) == ALLOW.format(IN1) and found.pop(IN2) == DENY.format(IN2)
    assert set(found) == {WILDCARD}
    assert (result.allowed, result.denied, result.unknown_allowed) == (1, 1, True)


def test_deny_mode_denies_out_of_scope_nodes_on_inspection(engine, hosts, racks):
    FilterSync(DatabaseSource(engine), str(hosts), Settings(scope=RACK1)).full_sync()
    found = files(hosts)
    assert found[IN1] == ALLOW.format(IN1)
    assert found[OUT1] == DENY.format(OUT1) and found[OUT2] == DENY.format(OUT2)


def test_unknown_macs_follow_only_in_scope_nodes(engine, hosts):
    add_node(engine, "inspect wait", [OUT1], "rack2")
    sync = FilterSync(DatabaseSource(engine), str(hosts), Settings(scope=RACK1))
    assert not sync.full_sync().unknown_allowed
    assert files(hosts)[WILDCARD].endswith(",ignore\n")
    add_node(engine, "inspect wait", [IN1], "rack1")
    assert sync.full_sync().unknown_allowed


def test_broadcast_allow_of_an_out_of_scope_mac_stays_denied(engine, hosts, racks):
    sync = FilterSync(DatabaseSource(engine), str(hosts), Settings(scope=RACK1))
    sync.full_sync()
    sync.hint(allow=[OUT1, IN2, LOOSE])
    result = sync.reconcile_pending()
    found = files(hosts)
    assert found[OUT1] == DENY.format(OUT1)
    assert found[IN2] == DENY.format(IN2)  # in scope but active: the database decides
    assert LOOSE not in found  # a MAC of no port: left to the wildcard
    assert (result.allowed, result.denied, result.unknown) == (0, 2, 1)


def test_broadcast_allow_of_an_out_of_scope_mac_writes_nothing_in_wildcard_mode(
        engine, hosts, racks):
    sync = FilterSync(DatabaseSource(engine), str(hosts), Settings(scope=RACK1_WILDCARD))
    sync.full_sync()
    sync.hint(allow=[OUT1], deny=[OUT2])
    assert files(hosts)[OUT2] == DENY.format(OUT2)  # denies apply at once, as ever
    result = sync.reconcile_pending()
    found = files(hosts)
    assert OUT1 not in found  # its node is left to the wildcard
    # OUT2 had no port of this scope: its file now says what the wildcard says
    assert found[OUT2] == ALLOW.format(OUT2) and found[WILDCARD] == ALLOW.format(WILDCARD_MAC)
    assert (result.allowed, result.denied, result.unknown) == (0, 0, 2)


def test_broadcast_allow_waits_without_the_database(tmp_path, hosts):
    broken = create_engine(f"sqlite:///{tmp_path}/no-tables.sqlite")  # every read fails
    sync = FilterSync(MemorySource(), str(hosts), Settings(scope=RACK1))
    sync.full_sync()
    sync.source = DatabaseSource(broken)
    result = sync.hint(allow=[IN1], deny=[IN2])
    with pytest.raises(DatabaseError):
        sync.reconcile_pending()
    assert IN1 not in files(hosts) and files(hosts)[IN2] == DENY.format(IN2)
    assert (result.allowed, result.denied) == (1, 1) and sync.pending


def test_scope_changed_on_sighup_applies_to_the_next_sync(engine, hosts, racks):
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    assert files(hosts)[OUT1] == ALLOW.format(OUT1)
    sync.settings = Settings(scope=RACK1)
    sync.full_sync()
    assert files(hosts)[OUT1] == DENY.format(OUT1)


# -- notifications -----------------------------------------------------------------------
@pytest.mark.parametrize("scope", [RACK1, RACK1_WILDCARD])
def test_a_notification_for_an_out_of_scope_node_never_opens_it(engine, hosts, scope):
    sync = FilterSync(DatabaseSource(engine), str(hosts), Settings(scope=scope))
    sync.full_sync()
    follower = NotificationFollower(sync)
    out = add_node(engine, "inspect wait", [OUT1], "rack2")
    follower.sync.hint(nodes=[out])
    sync.reconcile_pending()
    assert files(hosts).get(OUT1, DENY.format(OUT1)) == DENY.format(OUT1)
    assert files(hosts)[WILDCARD].endswith(",ignore\n")  # no in-scope node on inspection
    inside = add_node(engine, "inspect wait", [IN1], "rack1")
    follower.sync.hint(nodes=[inside])
    sync.reconcile_pending()
    assert files(hosts)[IN1] == ALLOW.format(IN1)
    assert not files(hosts)[WILDCARD].endswith(",ignore\n")
    if not scope.deny_outside:
        assert OUT1 not in files(hosts)  # wildcard mode: no file of its own
