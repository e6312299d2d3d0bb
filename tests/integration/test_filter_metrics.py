"""The filter daemon's Prometheus endpoint, scraped from a real process."""

import signal
import socket
import time
import uuid

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter import broadcast
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from tests.support.daemon import run_filter, start_filter
from tests.support.metrics import scrape, value, wait_for
from tests.support.services_procs import free_port

M1, M2, M3 = "52:54:00:00:01:01", "52:54:00:00:01:02", "52:54:00:00:01:03"


def add_node(url, state, mac):
    engine = create_engine(url)
    with engine.begin() as conn:
        node = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state=state, inspect_interface="agent",
            conductor_group="")).inserted_primary_key[0]
        conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), address=mac,
                                            node_id=node))
    engine.dispose()


@pytest.fixture
def database(sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    add_node(sqlite_url, "active", M1)
    add_node(sqlite_url, "inspect wait", M2)
    return sqlite_url


def test_metrics_follow_syncs_broadcasts_and_repairs(database, rabbit_url, tmp_path):
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    daemon = start_filter(tmp_path, database, hostsdir, transport_url=rabbit_url,
                          extra_conf={"pxe_filter": {"prometheus_port": port,
                                                     "sync_period": 1}})
    transport = messaging.get_transport(rabbit_url)
    try:
        daemon.wait_ready(30)
        first = scrape(url)
        assert value(first, "ironic_pxe_filter_ready") == 1
        assert value(first, "ironic_pxe_filter_allowed_macs") == 1
        assert value(first, "ironic_pxe_filter_denied_macs") == 1
        assert value(first, "ironic_pxe_filter_unknown_macs_allowed") == 1
        assert value(first, "ironic_pxe_filter_fail_closed") == 0
        assert value(first, "ironic_pxe_filter_syncs_total") >= 1
        assert value(first, "ironic_pxe_filter_sync_duration_seconds_count") >= 1
        assert value(first, "ironic_pxe_filter_files_written_total", origin="sync") >= 2
        assert value(first, "ironic_pxe_filter_broadcasts_total") == 0
        assert value(first, "ironic_pxe_filter_served_denied_total") == 0
        assert value(first, "process_resident_memory_bytes") > 0

        # The periodic sync counts up by itself.
        syncs = value(first, "ironic_pxe_filter_syncs_total")
        wait_for(url, lambda s: value(s, "ironic_pxe_filter_syncs_total") > syncs)

        # Sent raw: the Python client would refuse the invalid entry before sending.
        client = messaging.oslo_messaging_module().get_rpc_client(
            transport, broadcast.target(fanout=True))
        # M2's node is on inspection: its deny is written at once, then the database
        # reopens it; M3 has no port: the (open) wildcard serves it without a file.
        client.cast({}, broadcast.METHOD, allow=[M3], deny=["not-a-mac", M2])
        after = wait_for(url, lambda s: value(
            s, "ironic_pxe_filter_files_written_total", origin="broadcast") == 2)
        assert value(after, "ironic_pxe_filter_broadcasts_total") == 1
        assert value(after, "ironic_pxe_filter_broadcast_macs_total", decision="allow") == 1
        assert value(after, "ironic_pxe_filter_broadcast_macs_total", decision="deny") == 1
        assert value(after, "ironic_pxe_filter_broadcast_macs_total",
                     decision="rejected") == 1
        assert (hostsdir / M2).read_text() == f"{M2}\n" and not (hostsdir / M3).exists()

        (hostsdir / M1).unlink()  # someone else deletes a deny file: the daemon repairs it
        wait_for(url, lambda s: value(s, "ironic_pxe_filter_repairs_total") == 1)
        assert (hostsdir / M1).read_text() == f"{M1},ignore\n"
    finally:
        transport.cleanup()
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0, daemon.log_text()
    with pytest.raises(OSError):  # the port is closed with the daemon
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_metrics_port_in_use_is_a_configuration_error(database, tmp_path):
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        proc = start_filter(tmp_path, database, hostsdir,
                            extra_conf={"pxe_filter": {"prometheus_port": port}}, debug=False)
        try:
            code = proc.wait(30)
        finally:
            proc.stop()
    assert code == 2, proc.log_text()
    assert f"[pxe_filter]prometheus_host:prometheus_port 127.0.0.1:{port}" in proc.log_text()
    assert time.monotonic() - started < 30


def test_once_serves_no_metrics(database, tmp_path):
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    with socket.socket() as busy:  # --once never binds, so a busy port does not matter
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = run_filter(tmp_path, database, hostsdir, "--once",
                            extra_conf={"pxe_filter": {
                                "prometheus_port": busy.getsockname()[1]}})
    assert result.returncode == 0, result.stderr
