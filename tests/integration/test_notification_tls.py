"""Ironic's notifications over TLS, from a private RabbitMQ node that listens only with TLS."""

import os
import signal
import time
import uuid

import pytest
import sqlalchemy as sa
from oslo_config import cfg

from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter.common.database import create_engine
from pxe_filter.common.messaging import oslo_messaging_module
from tests.support.daemon import start_filter
from tests.support.rabbitmq import PrivateRabbit
from tests.support.services_procs import free_port

MAC = "52:54:00:7a:15:01"


@pytest.fixture(scope="module")
def tls_rabbit():
    with PrivateRabbit(tls=True) as rabbit:
        yield rabbit


def wait_log(daemon, text: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while text not in daemon.log_text():
        assert time.monotonic() < deadline, daemon.log_text()
        assert daemon.proc.poll() is None, daemon.log_text()
        time.sleep(0.1)


def notify_over_tls(rabbit: PrivateRabbit, node_uuid: str) -> None:
    """A provision state notification, sent as Ironic sends it (oslo.messaging, ?ssl=1)."""
    om = oslo_messaging_module()
    conf = cfg.ConfigOpts()
    conf([], project="sender")
    om.set_transport_defaults("ironic")  # Ironic's exchange (read when the driver loads)
    transport = om.get_notification_transport(conf, url=f"{rabbit.url}?ssl=1")
    conf.set_override("ssl_ca_file", rabbit.ca_file, group="oslo_messaging_rabbit")
    try:
        notifier = om.Notifier(transport, publisher_id="ironic-conductor.test",
                               driver="messagingv2", topics=["ironic_versioned_notifications"])
        notifier.info({}, "baremetal.node.provision_set.success",
                      {"ironic_object.name": "NodeSetProvisionStatePayload",
                       "ironic_object.data": {"uuid": node_uuid,
                                              "provision_state": "inspect wait"}})
    finally:
        transport.cleanup()


def add_node(url: str) -> str:
    node_uuid = str(uuid.uuid4())
    engine = create_engine(url)
    with engine.begin() as conn:
        node = conn.execute(sa.insert(Node).values(
            uuid=node_uuid, provision_state="inspect wait", inspect_interface="agent",
            conductor_group="")).inserted_primary_key[0]
        conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), address=MAC,
                                            node_id=node))
    engine.dispose()
    return node_uuid


def test_notifications_arrive_over_tls_with_failover(tls_rabbit, tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    # Two brokers, the first one down: the consumer fails over to the TLS one.
    url = (f"rabbit://guest:guest@localhost:{free_port()},"
           f"guest:guest@localhost:{tls_rabbit.port}/")
    daemon = start_filter(tmp_path, sqlite_url, hostsdir, extra_conf={
        "pxe_filter": {"ironic_notifications": True, "sync_period": 600},
        "oslo_messaging_notifications": {"transport_url": url},
        "oslo_messaging_rabbit": {"ssl": "true", "ssl_ca_file": tls_rabbit.ca_file,
                                  "heartbeat_timeout_threshold": 10}})
    try:
        daemon.wait_ready(30)
        wait_log(daemon, "Listening for Ironic's notifications")
        node_uuid = add_node(sqlite_url)  # after the first sync: only the notification tells
        notify_over_tls(tls_rabbit, node_uuid)
        deadline = time.monotonic() + 10
        while not (hostsdir / MAC).exists() or (hostsdir / MAC).read_text() != f"{MAC}\n":
            assert time.monotonic() < deadline, daemon.log_text()
            time.sleep(0.05)
        connections = tls_rabbit._ctl("list_connections", "ssl", "timeout").stdout
        assert "true\t10" in connections, connections  # TLS, and our heartbeat negotiated
    finally:
        assert daemon.stop() == 0, daemon.log_text()
    assert "Traceback" not in daemon.log_text()


def test_clear_text_against_a_tls_only_broker_says_what_to_set(tls_rabbit, tmp_path,
                                                                  sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, sqlite_url, hostsdir, extra_conf={
        "pxe_filter": {"ironic_notifications": True},
        "oslo_messaging_notifications": {"transport_url": tls_rabbit.url}})
    try:
        daemon.wait_ready(30)
        wait_log(daemon, "set [oslo_messaging_rabbit]ssl = true (or add ?ssl=1")
        assert daemon.proc.poll() is None  # the filter goes on with its periodic sync
    finally:
        assert daemon.stop() == 0, daemon.log_text()
    assert "Traceback" not in daemon.log_text()
    assert "guest:guest" not in daemon.log_text()


def test_a_frozen_broker_is_noticed_by_heartbeats(tls_rabbit, tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, sqlite_url, hostsdir, extra_conf={
        "pxe_filter": {"ironic_notifications": True},
        "oslo_messaging_notifications": {"transport_url": f"{tls_rabbit.url}?ssl=1"},
        "oslo_messaging_rabbit": {"ssl_ca_file": tls_rabbit.ca_file,
                                  "heartbeat_timeout_threshold": 2}})
    try:
        daemon.wait_ready(30)
        wait_log(daemon, "Listening for Ironic's notifications")
        os.kill(tls_rabbit.pid, signal.SIGSTOP)  # TCP stays up: only heartbeats tell
        try:
            start = time.monotonic()
            wait_log(daemon, "Ironic's notifications cannot be read", timeout=20)
            noticed = time.monotonic() - start
        finally:
            os.kill(tls_rabbit.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while daemon.log_text().count("Listening for Ironic's notifications") < 2:
            assert time.monotonic() < deadline, daemon.log_text()
            time.sleep(0.1)
    finally:
        assert daemon.stop() == 0, daemon.log_text()
    print(f"frozen broker noticed after {noticed:.1f} s")
    # py-amqp gives up after 2 x 2 s + 2 x 2 s / heartbeat_rate (5.3 s), then waits up to 5 s
    # for the TLS close. Before: TCP keepalive, about two hours by default.
    assert noticed < 15, daemon.log_text()
