"""An unmodified Ironic 39 answers the requests of tests/integration/test_api_unversioned.py
without a version header as that test expects our API to: its table of answers is Ironic's.

Ironic serves a request naming no version as 1.1; so does our API. The same node (a name,
the agent inspect interface, a port with PXE enabled) is made in Ironic at 1.96.
"""

import pytest
import requests

from tests.integration import test_api_unversioned as ours
from tests.integration.pipeline_support import body, macs_of
from tests.support.ironic import Ironic

pytestmark = pytest.mark.slow

V = {"X-OpenStack-Ironic-API-Version": "1.96"}


@pytest.fixture(scope="module")
def ironic(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("ironic-unversioned")
    server = Ironic(workdir, f"sqlite:///{workdir / 'ironic.sqlite'}", None)
    server.create_schema()
    server.start()
    yield server
    server.stop()


def _call(ironic: Ironic, method: str, path: str, versioned: bool = False,
          headers: dict | None = None, **kwargs) -> requests.Response:
    """No version header unless ``versioned`` (1.96) or ``headers`` name one."""
    return requests.request(method, ironic.url + path, timeout=30,
                            headers={**(V if versioned else {}), **(headers or {})}, **kwargs)


@pytest.fixture(scope="module")
def node(ironic):
    made = _call(ironic, "POST", "/v1/nodes", versioned=True, json={
        "driver": "fake-hardware", "name": "unnamed-1", "inspect_interface": "agent"})
    assert made.status_code == 201, made.text
    port = _call(ironic, "POST", "/v1/ports", versioned=True, json={
        "address": "52:54:00:11:00:01", "node_uuid": made.json()["uuid"],
        "pxe_enabled": True})
    assert port.status_code == 201, port.text
    return {**made.json(), "port": port.json()["uuid"]}


def test_ironic_shows_the_fields_of_1_1(ironic, node):
    shown = _call(ironic, "GET", f"/v1/nodes/{node['uuid']}").json()
    assert set(shown) == ours.NODE_FIELDS_1_1 - {"auto_discovered"}
    assert set(_call(ironic, "GET", f"/v1/ports/{node['port']}").json()) == \
        ours.PORT_FIELDS_1_1
    assert _call(ironic, "GET", "/v1").headers["X-OpenStack-Ironic-API-Version"] == "1.1"
    assert not set(_call(ironic, "GET", "/v1").json()) & {"inspection_rules",
                                                          "continue_inspection"}


def test_ironic_finds_nodes_by_uuid_only(ironic, node):
    assert _call(ironic, "GET", "/v1/nodes/unnamed-1").status_code == 404
    assert _call(ironic, "GET", f"/v1/nodes/{node['uuid']}.json").status_code == 404
    assert _call(ironic, "GET", f"/v1/nodes/{node['uuid']}.json",
                 headers={"X-OpenStack-Ironic-API-Version": "1.1"}).status_code == 200
    assert _call(ironic, "PUT", "/v1/nodes/unnamed-1/maintenance").status_code == 404


@pytest.mark.parametrize("case", ours.REFUSED + ours.SERVED, ids=ours.case_id)
def test_ironic_answers_as_our_table_says(ironic, node, case):
    method, path, data, status = case
    resp = _call(ironic, method, path.format(node=node["uuid"]), json=data)
    assert resp.status_code == status, resp.text


def test_ironic_answers_ports_at_1_1_as_our_table_says(ironic, node):
    plain = _call(ironic, "POST", "/v1/ports", json={"address": "52:54:00:11:00:02",
                                                     "node_uuid": node["uuid"]})
    assert plain.status_code == 201 and set(plain.json()) == ours.PORT_FIELDS_1_1
    refused = [
        _call(ironic, "POST", "/v1/ports", json={"address": "52:54:00:11:00:03",
                                                 "node_uuid": node["uuid"],
                                                 "pxe_enabled": False}),
        _call(ironic, "PATCH", f"/v1/ports/{node['port']}", json=[
            {"op": "replace", "path": "/pxe_enabled", "value": False}]),
        _call(ironic, "GET", "/v1/ports?node=unnamed-1"),
        _call(ironic, "GET", "/v1/ports?fields=uuid"),
        _call(ironic, "GET", "/v1/ports?sort_key=pxe_enabled"),
        _call(ironic, "GET", "/v1/ports?portgroup=x"),
    ]
    assert [r.status_code for r in refused] == [406] * len(refused)
    assert _call(ironic, "GET", "/v1/ports?detail=true").status_code == 400
    assert _call(ironic, "GET", f"/v1/ports?node={node['uuid']}").status_code == 200


def test_ironic_takes_the_callback_at_1_1_only_without_node_uuid(ironic):
    data = body("bios-vm-x86_64")
    made = _call(ironic, "POST", "/v1/nodes", versioned=True, json={
        "driver": "fake-hardware", "inspect_interface": "agent"}).json()
    _call(ironic, "POST", "/v1/ports", versioned=True,
          json={"address": macs_of(data)[0], "node_uuid": made["uuid"]})
    for target, state in (("manage", "manageable"), ("inspect", "inspect wait")):
        resp = _call(ironic, "PUT", f"/v1/nodes/{made['uuid']}/states/provision",
                     versioned=True, json={"target": target})
        assert resp.status_code == 202, resp.text
        ironic.wait_state(made["uuid"], state)
    refused = (_call(ironic, "POST", f"/v1/continue_inspection?node_uuid={made['uuid']}",
                     json=data),
               _call(ironic, "POST", "/v1/continue_inspection", json=data,
                     headers={"X-OpenStack-Ironic-API-Version": "1.83"}))
    for resp in refused:
        assert resp.status_code == 404
        assert "API version 1.84 or newer is required" in resp.text
    resp = _call(ironic, "POST", "/v1/continue_inspection", json=data)
    assert resp.status_code == 202 and resp.json() == {"uuid": made["uuid"]}

