"""OpenStack's middleware around the API: request IDs, /healthcheck and CORS (oslo.middleware)."""

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, basic, write_htpasswd

ORIGIN = "https://console.example.com"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("middleware")
    url = f"sqlite:///{tmp_path}/inspection.sqlite"
    migration.upgrade(create_engine(url))
    api = Api(api_conf(tmp_path, url,
                       api={"auth_strategy": "http_basic",
                            "http_basic_auth_user_file": write_htpasswd(
                                tmp_path / "htpasswd", {"operator": "pw"})},
                       cors={"allowed_origin": ORIGIN}))
    yield api
    api.close()


def test_every_answer_carries_a_request_id(api):
    answers = [api.client.get("/v1"), api.client.get("/v1/nodes"),
               api.client.get("/v1/nodes", headers=basic("operator", "pw")),
               api.client.get("/v1/nodes/missing", headers=basic("operator", "pw"))]
    assert [a.status_code for a in answers] == [200, 401, 200, 404]
    ids = [a.headers["x-openstack-request-id"] for a in answers]
    assert all(i.startswith("req-") for i in ids) and len(set(ids)) == len(ids)
    # Ironic's older header name too, for its clients.
    assert all(a.headers["openstack-request-id"] == i for a, i in zip(answers, ids, strict=True))


def test_healthcheck_needs_no_credentials(api):
    answer = api.client.get("/healthcheck")
    assert answer.status_code == 200
    assert api.client.get("/v1/nodes").status_code == 401  # the rest still needs them


def test_cors_lets_the_configured_origin_use_the_api(api):
    preflight = api.client.options("/v1/nodes", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "PATCH",
        "Access-Control-Request-Headers": "X-OpenStack-Ironic-API-Version"})
    assert preflight.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "PATCH" in preflight.headers["Access-Control-Allow-Methods"]
    answer = api.client.get("/v1", headers={"Origin": ORIGIN})
    assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
    exposed = answer.headers["Access-Control-Expose-Headers"]
    assert "X-OpenStack-Ironic-API-Version" in exposed
    other = api.client.get("/v1", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers
