"""Run contenders at the same instant, each on its own engine, as separate processes would."""

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy.engine import Engine

from pxe_filter.common.database import create_engine


@contextmanager
def engines(db_url: str, count: int) -> Iterator[list[Engine]]:
    """``count`` engines on ``db_url`` (own connections and transactions), disposed after."""
    made = [create_engine(db_url) for _ in range(count)]
    try:
        yield made
    finally:
        for engine in made:
            engine.dispose()


def race(calls: Sequence[Callable[[], object]], timeout: float = 120) -> list[object]:
    """Start every call at once (a barrier); each one's result or exception, in order."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = calls[index]()
        except Exception as exc:  # reported to the caller, which asserts on it
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return results
