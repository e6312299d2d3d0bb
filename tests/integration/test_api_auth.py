"""HTTP basic authentication (htpasswd with bcrypt) and noauth."""

import os

import pytest

from inspection.api.auth import HtpasswdError
from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import (
    PASSWORD,
    USER,
    Api,
    api_conf,
    basic,
    error_message,
    write_htpasswd,
)
from tests.integration.pipeline_support import body

ADMIN_PATHS = [("get", "/v1/nodes"), ("get", "/v1/ports"), ("get", "/v1/inspection_rules"),
               ("post", "/v1/inspection_rules"), ("delete", "/v1/inspection_rules"),
               ("post", "/v1/inspection_rules/explain"), ("post", "/v1/nodes"),
               ("get", "/v1/nodes/x/inventory"), ("put", "/v1/nodes/x/states/provision")]


@pytest.fixture
def db(sqlite_url):
    migration.upgrade(create_engine(sqlite_url))
    return sqlite_url


@pytest.fixture
def htpasswd(tmp_path):
    return write_htpasswd(tmp_path / "htpasswd", {USER: PASSWORD, "other": "pw2"})


@pytest.fixture
def api(tmp_path, db, htpasswd):
    api = Api(api_conf(tmp_path, db, api={"auth_strategy": "http_basic",
                                          "http_basic_auth_user_file": htpasswd}))
    yield api
    api.close()


@pytest.mark.parametrize("method, path", ADMIN_PATHS)
def test_admin_endpoints_need_credentials(api, method, path):
    for headers in ({}, basic(USER, "wrong"), basic("nobody", PASSWORD),
                    {"Authorization": "Basic !!!"}, {"Authorization": "Bearer abc"}):
        resp = getattr(api.client, method)(path, headers=headers, json={})
        assert resp.status_code == 401, headers
        assert resp.headers["WWW-Authenticate"].startswith("Basic realm=")
        assert error_message(resp) == "Authentication required"


def test_valid_credentials(api):
    assert api.client.get("/v1/nodes", headers=basic()).status_code == 200
    assert api.client.get("/v1/nodes", headers=basic("other", "pw2")).status_code == 200
    # cached verification must still reject a wrong password for the same user
    assert api.client.get("/v1/nodes", headers=basic(USER, "wrong")).status_code == 401


def test_public_endpoints(api):
    for path in ("/", "/v1", "/v1/openapi.json"):
        assert api.client.get(path).status_code == 200
    resp = api.client.post("/v1/continue_inspection", json=body("bios-vm-x86_64"))
    assert resp.status_code == 404  # reached the lookup, no credentials needed


def test_file_is_reread_when_it_changes(api, htpasswd, tmp_path):
    assert api.client.get("/v1/nodes", headers=basic()).status_code == 200
    write_htpasswd(tmp_path / "htpasswd", {"newuser": "newpw"})
    os.utime(htpasswd, ns=(1, 1))  # a different mtime even within one clock tick
    assert api.client.get("/v1/nodes", headers=basic()).status_code == 401
    assert api.client.get("/v1/nodes", headers=basic("newuser", "newpw")).status_code == 200
    # a broken file locks everyone out (fail closed) until fixed
    (tmp_path / "htpasswd").write_text("newuser:plaintext\n")
    assert api.client.get("/v1/nodes", headers=basic("newuser", "newpw")).status_code == 401


@pytest.mark.parametrize("content, words", [
    (None, "cannot read"),
    ("admin:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", "bcrypt"),
    ("admin:$apr1$abc$def\n", "bcrypt"),
    ("just-a-name\n", "user:bcrypt-hash"),
    ("# only a comment\n", "no user"),
])
def test_bad_htpasswd_file_stops_start(tmp_path, db, content, words):
    path = tmp_path / "bad-htpasswd"
    if content is not None:
        path.write_text(content)
    conf = api_conf(tmp_path, db, api={"auth_strategy": "http_basic",
                                       "http_basic_auth_user_file": str(path)})
    with pytest.raises(HtpasswdError, match=words):
        Api(conf)


def test_noauth(tmp_path, db):
    api = Api(api_conf(tmp_path, db, api={"auth_strategy": "noauth"}))
    try:
        assert api.client.get("/v1/nodes").status_code == 200
    finally:
        api.close()
