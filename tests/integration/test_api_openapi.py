"""The OpenAPI document matches the routes, and every error is JSON."""

import logging
import re

import pytest
import sqlalchemy as sa

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message

METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture
def api(tmp_path, sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    api = Api(api_conf(tmp_path, sqlite_url))
    yield api
    api.close()


def test_every_route_is_documented_and_vice_versa(api):
    doc = api.client.get("/v1/openapi.json").json
    assert doc["openapi"].startswith("3.")
    documented = {(path, method) for path, item in doc["paths"].items()
                  for method in item if method in METHODS}
    routed = set()
    for rule in api.app.url_map.iter_rules():
        path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule)
        routed |= {(path, m.lower()) for m in rule.methods if m.lower() in METHODS}
    assert routed == documented


def test_documented_references_resolve(api):
    doc = api.client.get("/v1/openapi.json").json
    refs = []

    def collect(value):
        if isinstance(value, dict):
            if isinstance(value.get("$ref"), str):
                refs.append(value["$ref"].removeprefix("#/"))
            for sub in value.values():
                collect(sub)
        elif isinstance(value, list):
            for sub in value:
                collect(sub)

    collect(doc)
    assert len(refs) > 20
    for ref in refs:
        node = doc
        for part in ref.split("/"):
            node = node[part]


@pytest.mark.parametrize("method, path, code", [
    ("get", "/nowhere", 404),
    ("get", "/v1/nodes/x/y/z", 404),
    ("delete", "/v1/continue_inspection", 405),
    ("post", "/v1/openapi.json", 405),
])
def test_routing_errors_are_json(api, method, path, code):
    resp = getattr(api.client, method)(path)
    assert resp.status_code == code
    assert resp.mimetype == "application/json"
    assert isinstance(error_message(resp), str)
    if code == 405:
        assert "Allow" in resp.headers


def test_internal_error_is_json_without_traceback(api, caplog):
    with api.context.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE ports"))
    with caplog.at_level(logging.ERROR, logger="inspection.api"):
        resp = api.client.get("/v1/ports")
    assert resp.status_code == 500 and resp.mimetype == "application/json"
    text = resp.get_data(as_text=True)
    assert "Traceback" not in text and "ports" not in text
    assert error_message(resp).startswith("Internal server error")
    assert any(r.exc_info for r in caplog.records)  # the traceback went to the log
