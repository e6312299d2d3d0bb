"""A tiny update_pxe_filters consumer on a real RabbitMQ vhost, recording what arrives."""

import threading
import time
import uuid

import pytest

from pxe_filter import broadcast
from pxe_filter.broadcast import FilterNotifier
from pxe_filter.common import messaging

om = messaging.oslo_messaging_module()

PROBE_MAC = "02:00:00:00:00:99"


class RecordingEndpoint:
    """Records every broadcast it receives."""

    target = om.Target(version=broadcast.VERSION)

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.cond = threading.Condition()

    @om.expose
    def update_pxe_filters(self, context, allow=None, deny=None):
        with self.cond:
            self.calls.append({"allow": allow or [], "deny": deny or []})
            self.cond.notify_all()

    def wait_for(self, predicate, timeout=10.0) -> list[dict]:
        """Wait until ``predicate(calls)`` holds; returns the calls (fails on timeout)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate(self.calls):
                left = deadline - time.monotonic()
                assert left > 0, f"broadcast did not arrive; got {self.calls}"
                self.cond.wait(left)
            return list(self.calls)

    def reset(self) -> None:
        with self.cond:
            self.calls.clear()


class FilterListener:
    """An RPC server consuming the fanout like a filter daemon would."""

    def __init__(self, transport_url: str) -> None:
        self.transport = messaging.get_transport(transport_url)
        self.endpoint = RecordingEndpoint()
        self.server = om.get_rpc_server(
            self.transport, broadcast.target(server=f"listener-{uuid.uuid4().hex[:6]}"),
            [self.endpoint], access_policy=om.ExplicitRPCAccessPolicy)

    def start(self, notifier: FilterNotifier) -> None:
        """Start consuming; returns once a probe broadcast has arrived (queue bound)."""
        self.server.start()
        deadline = time.monotonic() + 20
        while True:
            notifier.update(allow=[PROBE_MAC])
            try:
                self.endpoint.wait_for(lambda calls: calls, timeout=0.5)
                break
            except AssertionError:
                assert time.monotonic() < deadline, "the listener never received a probe"
        time.sleep(0.2)  # let probes still in flight arrive before the test starts
        self.endpoint.reset()

    def stop(self) -> None:
        self.server.stop()
        self.server.wait()
        self.transport.cleanup()


@pytest.fixture
def listener(rabbit_url):
    """(notifier on the vhost, listener already receiving) for tests that assert broadcasts."""
    notifier = FilterNotifier(messaging.get_transport(rabbit_url))
    listener = FilterListener(rabbit_url)
    try:
        listener.start(notifier)
        yield notifier, listener.endpoint
    finally:
        listener.stop()
        notifier.close()
