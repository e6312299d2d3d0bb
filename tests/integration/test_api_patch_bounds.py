"""JSON PATCH cannot amplify: the size of the patched document is bounded before it is built."""

import resource
import time

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("patch-bounds")
    url = f"sqlite:///{tmp}/inspection.sqlite"
    migration.upgrade(create_engine(url))
    api = Api(api_conf(tmp, url))
    yield api
    api.close()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _copies(field: str) -> list[dict]:
    # Each copy nests the object in itself: its size doubles with every operation.
    return [{"op": "copy", "from": f"/{field}/a", "path": f"/{field}/a/c{i}"}
            for i in range(20)]


def test_twenty_copies_of_a_node_field_are_refused_before_they_are_built(api):
    node = api.client.post("/v1/nodes", json={"driver": "ipmi",
                                              "extra": {"a": {"x": "y" * 1000}}}).json
    rss, started = _rss_mb(), time.monotonic()
    resp = api.client.patch(f"/v1/nodes/{node['uuid']}", json=_copies("extra"))
    assert time.monotonic() - started < 1
    assert _rss_mb() - rss < 20
    assert resp.status_code == 400
    assert "[inspection_rules]max_node_size = 1048576" in error_message(resp)
    assert api.client.get(f"/v1/nodes/{node['uuid']}").json["extra"] == node["extra"]


def test_a_large_field_may_still_be_replaced_under_the_limit(api):
    node = api.client.post("/v1/nodes", json={"driver": "ipmi",
                                              "extra": {"a": "x" * 600_000}}).json
    resp = api.client.patch(f"/v1/nodes/{node['uuid']}", json=[
        {"op": "replace", "path": "/extra/a", "value": "y" * 600_000},
        {"op": "copy", "from": "/extra/a", "path": "/properties/b"}])
    assert resp.status_code == 400  # the copy would make 1.2 MB
    resp = api.client.patch(f"/v1/nodes/{node['uuid']}", json=[
        {"op": "replace", "path": "/extra/a", "value": "y" * 600_000}])
    assert resp.status_code == 200, resp.json
    assert resp.json["extra"]["a"] == "y" * 600_000


def test_port_and_rule_patches_are_bounded_too(api):
    node = api.client.post("/v1/nodes", json={"driver": "ipmi"}).json
    port = api.client.post("/v1/ports", json={"node_uuid": node["uuid"],
                                              "address": "52:54:00:12:34:56",
                                              "extra": {"a": {"x": "y" * 1000}}}).json
    resp = api.client.patch(f"/v1/ports/{port['uuid']}", json=_copies("extra"))
    assert resp.status_code == 400 and "patched port" in error_message(resp)
    rule = api.client.post("/v1/inspection_rules", json={
        "actions": [{"op": "set-attribute",
                     "args": {"path": "/extra/x", "value": "y" * 1000}}]}).json
    copies = [{"op": "copy", "from": "/actions", "path": f"/actions/0/args/c{i}"}
              for i in range(30)]
    resp = api.client.patch(f"/v1/inspection_rules/{rule['uuid']}", json=copies)
    assert resp.status_code == 400 and "patched rule" in error_message(resp)
