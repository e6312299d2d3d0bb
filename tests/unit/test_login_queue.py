"""The password check queue: best-ranked first, the worst pushed out, bounded waiting."""

import threading
import time

import pytest

from inspection.api.login_queue import LoginQueue, QueueFull


def waiter(queue, client, priority, log, hold=0.0):
    def run():
        try:
            with queue.slot(client, priority):
                log.append(client)
                time.sleep(hold)
        except QueueFull as exc:
            log.append(f"{client}: {exc}")

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_queued(queue, count):
    deadline = time.monotonic() + 5
    while len(queue._waiting) < count:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_freed_slot_goes_to_the_best_ranked_and_the_worst_is_pushed_out():
    queue = LoginQueue(slots=1, length=2, timeout=5)
    log = []
    with queue.slot("busy", (1, 0)):
        threads = [waiter(queue, "guesser-a", (1, 9), log)]
        wait_queued(queue, 1)
        threads.append(waiter(queue, "guesser-b", (1, 5), log))
        wait_queued(queue, 2)
        threads.append(waiter(queue, "admin", (1, 0), log))  # full: pushes out guesser-a
        deadline = time.monotonic() + 5
        while not log:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert log == ["guesser-a: pushed out of the queue by other password checks"]
    for thread in threads:
        thread.join(5)
    assert log[1:] == ["admin", "guesser-b"]


def test_a_worse_newcomer_is_refused_when_the_queue_is_full():
    queue = LoginQueue(slots=1, length=1, timeout=5)
    log = []
    with queue.slot("busy", (1, 0)):
        first = waiter(queue, "admin", (0, 0), log)
        wait_queued(queue, 1)
        with pytest.raises(QueueFull, match="too many"), queue.slot("guesser", (1, 3)):
            pass
    first.join(5)
    assert log == ["admin"]


def test_one_waiting_check_per_address():
    queue = LoginQueue(slots=1, length=3, timeout=5)
    log = []
    with queue.slot("busy", (1, 0)):
        first = waiter(queue, "shared", (1, 4), log)
        wait_queued(queue, 1)
        with pytest.raises(QueueFull, match="already waiting"), queue.slot("shared", (1, 4)):
            pass
        # A better-ranked check of the same address (its admin) takes the place.
        second = waiter(queue, "shared", (0, 4), log)
        first.join(5)
        assert log == ["shared: pushed out of the queue by other password checks"]
    second.join(5)
    assert log[1:] == ["shared"]


def test_waiting_is_bounded():
    queue = LoginQueue(slots=1, length=1, timeout=0.1)
    with queue.slot("busy", (1, 0)):
        start = time.monotonic()
        with pytest.raises(QueueFull, match="waited too long"), queue.slot("late", (0, 0)):
            pass
        assert time.monotonic() - start < 1
    with queue.slot("next", (1, 0)):  # the slot was given back, not lost
        pass
