"""The callback's token buckets: burst, refill, Retry-After, keys, a bounded table."""

import pytest

from inspection.api.ratelimit import TokenBuckets, client_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_rate():
    clock = Clock()
    buckets = TokenBuckets(rate=0.5, burst=3, clock=clock)
    assert [buckets.take("a") for _ in range(3)] == [0, 0, 0]
    assert buckets.take("a") == pytest.approx(2.0)  # one token per 2 s
    assert buckets.take("b") == 0  # another address is untouched
    clock.now += 2
    assert buckets.take("a") == 0
    assert buckets.take("a") > 0
    clock.now += 3600  # refills up to the burst, no further
    assert [buckets.take("a") for _ in range(4)][-1] > 0


def test_the_table_is_bounded_and_forgets_idle_clients_first():
    clock = Clock()
    buckets = TokenBuckets(rate=1, burst=2, max_clients=3, clock=clock)
    buckets.take("refilled")
    clock.now += 10  # "refilled" is full again: it goes first
    for name in ("a", "b", "c"):
        buckets.take(name)
    assert set(buckets._buckets) == {"a", "b", "c"}


def test_without_idle_clients_the_least_recently_seen_go():
    clock = Clock()
    buckets = TokenBuckets(rate=0.001, burst=2, max_clients=3, clock=clock)
    for name in ("a", "b", "c", "a", "d"):
        clock.now += 1
        buckets.take(name)
    assert set(buckets._buckets) == {"a", "d"}  # down to 7/8 of the table, oldest first


@pytest.mark.parametrize("address, key", [
    ("192.0.2.7", "192.0.2.7"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
    ("::ffff:192.0.2.7", "192.0.2.7"),
    ("not-an-address", "not-an-address"),
])
def test_client_keys(address, key):
    assert client_key(address) == key
