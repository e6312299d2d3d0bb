"""The daemon's notification queue on a real RabbitMQ: bounded, and gone after the daemon."""

import json
import shutil
import signal
import subprocess
import time

import kombu

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support.daemon import start_filter

EXPIRES = 5


def queues(vhost_url: str) -> dict[str, dict]:
    vhost = vhost_url.rsplit("/", 1)[1]
    out = subprocess.run([shutil.which("rabbitmqctl"), "list_queues", "-p", vhost, "--formatter",
                          "json", "name", "arguments", "messages"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    result = {}
    for queue in json.loads(out):
        args = queue["arguments"]
        # rabbitmqctl prints arguments as [[name, type, value]...] or as an object.
        queue["arguments"] = {a[0]: a[-1] for a in args} if isinstance(args, list) else args
        result[queue["name"]] = queue
    return result


def test_queue_is_bounded_and_expires_after_the_daemon(tmp_path, sqlite_url, rabbit_url):
    migration.upgrade(create_engine(sqlite_url))
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, sqlite_url, hostsdir, name="notified", extra_conf={
        "pxe_filter": {"ironic_notifications": True, "notification_queue_expires": EXPIRES,
                       "notification_queue_max_length": 100},
        "oslo_messaging_notifications": {"transport_url": rabbit_url}})
    try:
        daemon.wait_ready(30)
        deadline = time.monotonic() + 20
        while "Listening for Ironic's notifications" not in daemon.log_text():
            assert time.monotonic() < deadline, daemon.log_text()
            time.sleep(0.1)
        mine = [q for name, q in queues(rabbit_url).items()
                if name.startswith("ironic-pxe-filter.notified-")]
        assert len(mine) == 1
        assert mine[0]["arguments"]["x-expires"] == EXPIRES * 1000
        assert mine[0]["arguments"]["x-max-length"] == 100
        # Garbage on Ironic's topic is counted and dropped; the daemon lives on.
        with kombu.Connection(rabbit_url.replace("rabbit://", "amqp://")) as conn:
            producer = conn.Producer(exchange=kombu.Exchange("ironic", type="topic",
                                                             durable=False))
            for _ in range(50):
                producer.publish(b"\x00not json", content_type="application/json",
                                 routing_key="ironic_versioned_notifications.info")
        deadline = time.monotonic() + 10
        while "Ironic notification ignored (malformed)" not in daemon.log_text():
            assert time.monotonic() < deadline, daemon.log_text()
            time.sleep(0.1)
        warnings = [line for line in daemon.log_text().splitlines()
                    if "WARNING" in line and "notification ignored" in line]
        assert len(warnings) == 1, warnings  # one line for 50 (the rest only at DEBUG)
    finally:
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0, daemon.log_text()
    deadline = time.monotonic() + EXPIRES + 15
    while any(name.startswith("ironic-pxe-filter.notified-") for name in queues(rabbit_url)):
        assert time.monotonic() < deadline, "the stopped daemon's queue did not expire"
        time.sleep(1)
