"""FilterNotifier: broadcasts reach a real consumer over RabbitMQ; failures never propagate."""

import logging
import time

from pxe_filter.broadcast import FilterNotifier
from pxe_filter.common import messaging
from tests.integration.filter_listener import listener  # noqa: F401 - fixture
from tests.integration.node_factory import make_conf

M1, M2 = "52:54:00:aa:00:01", "52:54:00:aa:00:02"


def test_allow_and_deny_arrive_normalised(listener):  # noqa: F811
    notifier, endpoint = listener
    assert notifier.update(allow=[M1.upper(), "not-a-mac"])
    assert notifier.update(deny=[M2.replace(":", "-")])
    calls = endpoint.wait_for(lambda calls: len(calls) >= 2)
    assert calls == [{"allow": [M1], "deny": []}, {"allow": [], "deny": [M2]}]


def test_nothing_valid_sends_nothing(listener):  # noqa: F811
    notifier, endpoint = listener
    assert notifier.update(allow=[], deny=["bogus"]) is False
    assert notifier.update(deny=[M1])
    # Only the second broadcast arrives: the first was never sent.
    assert endpoint.wait_for(lambda calls: calls) == [{"allow": [], "deny": [M1]}]


def test_without_transport_it_is_a_logged_no_op(caplog):
    notifier = FilterNotifier(None)
    with caplog.at_level(logging.DEBUG, logger="pxe_filter.broadcast"):
        assert notifier.update(allow=[M1]) is False
    assert "No message bus" in caplog.text


def test_from_conf_without_transport_url_is_a_no_op(tmp_path):
    notifier = FilterNotifier.from_conf(make_conf(tmp_path))
    assert notifier.transport is None
    assert notifier.update(deny=[M1]) is False


def test_unreachable_bus_is_logged_not_raised(caplog):
    # Nothing listens on port 1 of localhost: the broadcast fails after bounded retries.
    notifier = FilterNotifier(messaging.get_transport("rabbit://guest:guest@127.0.0.1:1/"),
                              retry=0)
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="pxe_filter.broadcast"):
            assert notifier.update(allow=[M1]) is False
    finally:
        notifier.close()
    assert time.monotonic() - started < 30
    assert "broadcast" in caplog.text and "failed" in caplog.text
