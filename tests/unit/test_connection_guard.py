"""The connection guard's accounting: IPv6 clients counted by /64, and the reserve of the
total kept for light clients."""

import ipaddress

from inspection.api.connections import ConnectionGuard
from inspection.api.ratelimit import client_key


def _v6(n: int) -> str:
    return str(ipaddress.IPv6Address("2001:db8:0:7::") + n * 0x10001)


def test_one_ipv6_host_is_one_client_however_many_addresses_it_uses():
    guard = ConnectionGuard(per_client=50, deadline=60)
    admitted = [guard.admit(client_key(_v6(n))) for n in range(51)]
    assert admitted == [True] * 50 + [False]
    assert guard.admit(client_key("2001:db8:0:8::1"))  # another /64
    assert guard.admit(client_key("::ffff:192.0.2.1")) and guard.admit("192.0.2.1")


def test_the_reserve_goes_to_light_clients_only():
    guard = ConnectionGuard(per_client=50, deadline=60, capacity=200, reserve=100)
    for n in range(2):  # two heavy clients fill the shared part
        assert all(guard.admit(f"192.0.2.{n}") for _ in range(50))
    assert not guard.admit("192.0.2.0")  # over its own limit anyway
    heavy = "192.0.2.9"
    assert [guard.admit(heavy) for _ in range(6)] == [True] * 5 + [False]
    callbacks = [guard.admit(f"198.51.100.{n}") for n in range(90)]
    assert all(callbacks)  # 100 + 5 + 90 = 195 of 200
    assert [guard.admit(f"203.0.113.{n}") for n in range(6)] == [True] * 5 + [False]
    guard.release("198.51.100.1")
    assert guard.admit("203.0.113.99")  # room again once one closes
