"""What the login throttle remembers: budgets per (account, address) pair, ranks, bounds."""

from inspection.api.login_records import LoginRecords


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def records(max_keys: int = 1000) -> tuple[LoginRecords, Clock]:
    clock = Clock()
    return LoginRecords(window=60, max_failures=3, max_keys=max_keys, clock=clock), clock


def test_a_pair_that_spent_its_budget_waits_out_its_window_and_no_other_pair_does():
    rec, clock = records()
    assert [rec.failed("admin", "192.0.2.1") for _ in range(3)] == [1, 2, 3]
    clock.now += 20
    assert rec.refusal("admin", "192.0.2.1") == 40  # counted from the first failure
    assert rec.refusal("admin", "192.0.2.2") == 0  # the same account elsewhere
    assert rec.refusal("other", "192.0.2.1") == 0  # another account at that address
    clock.now += 40
    assert rec.refusal("admin", "192.0.2.1") == 0
    assert rec.failed("admin", "192.0.2.1") == 1  # a new window


def test_a_pair_that_never_failed_goes_before_every_pair_that_did():
    rec, clock = records()
    for n in range(50):
        rec.failed("admin", f"198.51.100.{n}")
    clock.now += 3000  # failures long ago still count, if little
    clean = rec.rank("admin", "192.0.2.1")
    assert clean[:2] == (0.0, 0.0)
    assert all(clean < rec.rank("admin", f"198.51.100.{n}") for n in range(50))
    rec.failed("admin", "192.0.2.1")
    rec.succeeded("admin", "192.0.2.1")  # logging in clears the pair
    assert rec.rank("admin", "192.0.2.1")[0] == 0.0


def test_a_retry_of_the_same_refused_attempt_counts_once():
    rec, _ = records()
    for _ in range(5):
        rec.refused("admin", "192.0.2.1", b"the admin's password")
    for n in range(5):
        rec.refused("admin", "198.51.100.1", b"guess %d" % n)
    patient = rec.rank("admin", "192.0.2.1")
    guesser = rec.rank("admin", "198.51.100.1")
    assert patient[:2] == (1.0, 1.0) and guesser[:2] == (5.0, 5.0)
    assert rec.refusal("admin", "198.51.100.1") == 0  # refusals spend no budget


def test_memory_is_bounded_and_the_least_recently_seen_go_first():
    rec, _ = records(max_keys=30)
    rec.failed("admin", "192.0.2.1")
    for n in range(100):
        rec.refused(f"user{n}", f"198.51.100.{n}", b"x")
        rec.refused("admin", "192.0.2.1", b"x")  # kept: seen again and again
        assert len(rec) <= 30
    assert rec.rank("admin", "192.0.2.1")[0] > 0
    assert rec.rank("user0", "198.51.100.0") == (0.0, 0.0, 0.0)
