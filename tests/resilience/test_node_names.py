"""Ironic's node-name rules: a name that cannot be looked up is never created."""

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message


@pytest.fixture
def api(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    api = Api(api_conf(tmp_path, sqlite_url))
    yield api
    api.close()


@pytest.mark.parametrize("name", ["rack/1", "a b", "x%2Fy", "nöde", "", "a" * 256, "q?x",
                                  "hash#1", "semi;colon"])
def test_names_ironic_refuses_are_refused(api, name):
    resp = api.client.post("/v1/nodes", json={"driver": "ipmi", "name": name})
    assert resp.status_code == 400, resp.json
    assert "name" in error_message(resp)
    assert api.client.get("/v1/nodes").json["nodes"] == []


def test_every_allowed_character_works_and_the_node_is_found_by_name(api):
    name = "Rack1-node_2.a~Z"
    created = api.client.post("/v1/nodes", json={"driver": "ipmi", "name": name})
    assert created.status_code == 201, created.json
    assert api.client.get(f"/v1/nodes/{name}").json["uuid"] == created.json["uuid"]
