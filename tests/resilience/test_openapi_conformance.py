"""A bounded schemathesis run against the API on PostgreSQL: no 5xx, and every answer (status,
content type, body) is what the OpenAPI document says.

Each operation gets ``MAX_EXAMPLES`` generated requests plus schemathesis's coverage cases
(60 to 75 s in all on two shared cores). The database holds a node, a port, a rule and an
inventory under the documents' example identifiers, so successful answers are checked too.
"""

import time

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from inspection.api.openapi import document
from inspection.db import migration
from inspection.db.models import Base
from pxe_filter.common.database import create_engine
from tests.integration.pipeline_support import body, macs_of
from tests.support.services_procs import API_HEADERS, start_api

MAX_EXAMPLES = 20
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
NODE = "f2b4c1a8-0c3e-4c55-9a52-3f1f7d3a2e10"
RULE = "7d1e3f0a-2b4c-4d6e-8f10-a2b3c4d5e6f7"

schema = schemathesis.openapi.from_dict(document())


def _seed(url: str) -> None:
    data = body("bios-vm-x86_64")

    def call(method, path, json, status):
        # as our CLI names a version; the ramdisk's callback names none, as IPA's
        headers = {} if path == "/v1/continue_inspection" else API_HEADERS
        resp = requests.request(method, url + path, json=json, headers=headers, timeout=30)
        assert resp.status_code == status, (method, path, resp.text)

    call("POST", "/v1/nodes", {"driver": "ipmi", "name": "node-1", "uuid": NODE,
                               "driver_info": {"ipmi_password": "x"}}, 201)
    call("POST", "/v1/inspection_rules", {"uuid": RULE, "actions": [{
        "op": "set-attribute", "args": {"path": "/extra/checked", "value": True}}]}, 201)
    call("PUT", "/v1/nodes/node-1/states/provision", {"target": "manage"}, 202)
    call("PUT", "/v1/nodes/node-1/states/provision", {"target": "inspect"}, 202)
    call("POST", "/v1/ports", {"address": macs_of(data)[0], "node_uuid": NODE}, 201)
    call("POST", "/v1/continue_inspection", data, 202)
    deadline = time.monotonic() + 30
    while requests.get(f"{url}/v1/nodes/{NODE}/inventory", headers=API_HEADERS,
                       timeout=30).status_code != 200:
        assert time.monotonic() < deadline, "the seeded inspection never finished"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def server(tmp_path_factory, pg_url):
    engine = create_engine(pg_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    engine.dispose()
    api = start_api(tmp_path_factory.mktemp("openapi"), pg_url)
    try:
        api.wait_ready()
        _seed(api.url)
        yield api
    finally:
        api.stop()


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_every_answer_matches_the_document(case, server):
    response = case.call(base_url=server.url)
    case.validate_response(response, checks=CHECKS)
