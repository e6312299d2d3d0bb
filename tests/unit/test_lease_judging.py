"""The lease check: a lease to a MAC the database denies is a violation unless the filter
had closed that MAC (or the wildcard) moments before dnsmasq granted it. A close made by the
check's own read of the database is no such moment: the filter was behind."""

import time
from types import SimpleNamespace

from pxe_filter import daemon as daemon_module
from pxe_filter.leases import Lease
from pxe_filter.source import DatabaseSource
from pxe_filter.sync import FilterSync
from tests.unit.test_sync import M1, M2, add_node, content, set_state


def judge(engine, hosts, deny_by_hint: bool) -> list[str]:
    """Put M1 on inspection, take it off in the database, lease it; the MACs reported."""
    node = add_node(engine, "inspect wait", [M1])
    add_node(engine, "inspect wait", [M2])  # keeps a node served: unknown MACs allowed
    sync = FilterSync(DatabaseSource(engine), str(hosts))
    sync.full_sync()
    assert content(hosts, M1) == f"{M1}\n"
    set_state(engine, node, "manageable")
    if deny_by_hint:
        sync.hint(deny=[M1])  # the filter closed it itself, then dnsmasq's report came
    lease = Lease(time.time() - 1, "add", M1, "192.0.2.10")
    reported: list[str] = []
    checker = object.__new__(daemon_module.Daemon)
    checker.sync = sync
    checker._hints_retry_at, checker._hints_failing = 0.0, False
    checker._reload_beyond_threshold = lambda result: None
    checker.metrics = SimpleNamespace(written=lambda result: None)
    checker._served_denied = lambda mac, *rest: reported.append(mac)
    checker._judge_leases([lease], {M1})
    assert content(hosts, M1) == f"{M1},ignore\n"  # closed either way
    return reported


def test_a_lease_before_the_filter_caught_up_is_reported(engine, hosts):
    assert judge(engine, hosts, deny_by_hint=False) == [M1]


def test_a_lease_just_before_the_filter_closed_the_mac_is_not(engine, hosts):
    assert judge(engine, hosts, deny_by_hint=True) == []
