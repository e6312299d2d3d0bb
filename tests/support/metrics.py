"""Scrape a real ``/metrics`` endpoint and read samples from it, as Prometheus would."""

import time
from collections.abc import Callable

import requests
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset], float]


def scrape(url: str, auth: tuple[str, str] | None = None) -> Samples:
    """Every sample at ``url``: {(sample name, frozenset of label items): value}."""
    response = requests.get(url, auth=auth, timeout=10)
    assert response.status_code == 200, (response.status_code, response.text[:500])
    assert response.headers["Content-Type"].startswith("text/plain"), response.headers
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly these labels, or None when absent."""
    return samples.get((name, frozenset(labels.items())))


def wait_for(url: str, check: Callable[[Samples], bool], timeout: float = 10.0,
             auth: tuple[str, str] | None = None) -> Samples:
    """Scrape until ``check(samples)`` holds; fail with the last scrape after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(url, auth)
        if check(samples):
            return samples
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s; last scrape: "
                                 f"{ {k[0]: v for k, v in samples.items()} }")
        time.sleep(0.1)
