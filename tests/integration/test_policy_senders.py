"""Every broadcast sender applies the filter's own policy: a real daemon listens on RabbitMQ.

The regression: a port created through the API for a node in ``inspect wait`` whose inspect
interface the filters do not support was broadcast as allowed, so dnsmasq served it (the
wildcard allowed unknown MACs during inspection) until the next full sync denied it.
"""

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf
from tests.integration.node_factory import add_node
from tests.support.daemon import start_filter
from tests.support.files import time_until

ON_AGENT = "52:54:00:aa:00:01"
NEW_REDFISH, NEW_AGENT = "52:54:00:aa:00:02", "52:54:00:aa:00:03"
FAR = 3600  # sync period out of reach: only broadcasts can change the files


def wait_for(path: Path, expected: str) -> None:
    time_until(path, expected, timeout=5.0)


@contextmanager
def api_and_filter(tmp_path, sqlite_url, rabbit_url, *nodes: dict) -> Iterator[tuple]:
    """Our API casting broadcasts and a filter daemon listening, on one SQLite database
    holding ``nodes`` (add_node arguments); the periodic sync is out of reach."""
    migration.upgrade(create_engine(sqlite_url))
    api = Api(api_conf(tmp_path, sqlite_url, DEFAULT={"transport_url": rabbit_url}))
    added = [add_node(api.context.engine, **node) for node in nodes]
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    daemon = start_filter(tmp_path, sqlite_url, hostsdir, transport_url=rabbit_url,
                          extra_conf={"pxe_filter": {"sync_period": FAR}})
    try:
        daemon.wait_ready(30)
        yield api, hostsdir, added
    finally:
        daemon.signal(signal.SIGTERM)
        assert daemon.stop() == 0, daemon.log_text()
        api.close()


@pytest.fixture
def setup(tmp_path, sqlite_url, rabbit_url):
    # One node on inspection with a supported interface: unknown MACs are served.
    with api_and_filter(tmp_path, sqlite_url, rabbit_url,
                        {"state": "inspect wait", "macs": [ON_AGENT],
                         "inspect_interface": "agent"}) as (api, hostsdir, _):
        wait_for(hostsdir / "unknown_hosts_filter", "*:*:*:*:*:*\n")
        yield api, hostsdir


def test_new_port_of_unsupported_interface_node_is_denied_at_once(setup):
    api, hostsdir = setup
    redfish = add_node(api.context.engine, state="inspect wait", inspect_interface="redfish")
    resp = api.client.post("/v1/ports", json={"address": NEW_REDFISH,
                                              "node_uuid": redfish["uuid"]})
    assert resp.status_code == 201, resp.json
    wait_for(hostsdir / NEW_REDFISH, f"{NEW_REDFISH},ignore\n")


def test_new_port_of_supported_interface_node_is_allowed_at_once(setup):
    api, hostsdir = setup
    agent = add_node(api.context.engine, state="inspect wait", inspect_interface="agent")
    resp = api.client.post("/v1/ports", json={"address": NEW_AGENT, "node_uuid": agent["uuid"]})
    assert resp.status_code == 201, resp.json
    wait_for(hostsdir / NEW_AGENT, f"{NEW_AGENT}\n")


def test_inspection_start_of_unsupported_interface_node_keeps_it_denied(setup):
    api, hostsdir = setup
    # A redfish node inspected out-of-band: accepted, and its MACs are never served.
    node = add_node(api.context.engine, state="manageable", macs=[NEW_REDFISH],
                    inspect_interface="redfish", driver="redfish",
                    driver_info={"redfish_address": "https://192.0.2.1"})
    resp = api.client.put(f"/v1/nodes/{node['uuid']}/states/provision",
                          json={"target": "inspect"})
    assert resp.status_code < 300, resp.json
    # A deny is broadcast (the policy refuses redfish): the file appears as a deny, never
    # as an allow that the next sync would have to take back.
    wait_for(hostsdir / NEW_REDFISH, f"{NEW_REDFISH},ignore\n")


def test_wildcard_follows_our_broadcasts_at_once(tmp_path, sqlite_url, rabbit_url):
    with api_and_filter(tmp_path, sqlite_url, rabbit_url,
                        {"state": "manageable", "macs": [NEW_AGENT],
                         "inspect_interface": "agent"}) as (api, hostsdir, (node,)):
        wait_for(hostsdir / "unknown_hosts_filter", "*:*:*:*:*:*,ignore\n")
        path = f"/v1/nodes/{node['uuid']}/states/provision"
        assert api.client.put(path, json={"target": "inspect"}).status_code == 202
        wait_for(hostsdir / NEW_AGENT, f"{NEW_AGENT}\n")
        wait_for(hostsdir / "unknown_hosts_filter", "*:*:*:*:*:*\n")
        assert api.client.put(path, json={"target": "abort"}).status_code == 202
        wait_for(hostsdir / "unknown_hosts_filter", "*:*:*:*:*:*,ignore\n")
