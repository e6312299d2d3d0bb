"""HTTP basic authentication (htpasswd with bcrypt) and noauth."""

import os
import shutil
import subprocess

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
from tests.support import services

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
    resp = api.unversioned.post("/v1/continue_inspection", json=body("bios-vm-x86_64"))
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


def test_long_password_hashed_by_htpasswd_logs_in(tmp_path, db):
    # htpasswd -B hashes the first 72 bytes, as Apache checks them; bcrypt 5 refuses more.
    if shutil.which("htpasswd") is None:
        services.unavailable("htpasswd", "apache2-utils is not installed")
    password = "Long-passphrase-" + "x" * 84
    assert len(password) == 100
    path = tmp_path / "htpasswd-long"
    subprocess.run(["htpasswd", "-c", "-b", "-B", str(path), "admin", password], check=True,
                   capture_output=True, timeout=30)
    api = Api(api_conf(tmp_path, db, api={"auth_strategy": "http_basic",
                                          "http_basic_auth_user_file": str(path)}))
    try:
        assert api.client.get("/v1/nodes", headers=basic("admin", password)).status_code == 200
        wrong = password[:40] + "y" + password[41:]
        assert api.client.get("/v1/nodes", headers=basic("admin", wrong)).status_code == 401
    finally:
        api.close()


def _fail(api, address, times, user=USER):
    return [api.client.get("/v1/nodes", headers={**basic(user, "wrong"),
                                                 "X-Forwarded-For": address}).status_code
            for _ in range(times)]


@pytest.mark.parametrize("parsing", [True, False])
def test_throttle_keys_on_the_forwarded_address_only_behind_a_proxy(tmp_path, db, htpasswd,
                                                                   parsing):
    api = Api(api_conf(tmp_path, db, api={"auth_strategy": "http_basic",
                                          "http_basic_auth_user_file": htpasswd,
                                          "auth_max_failures": 3},
                       oslo_middleware={"enable_proxy_headers_parsing": parsing}))
    try:
        # The client claims an address of its own first; only the proxy's entry counts.
        assert _fail(api, "203.0.113.9, 192.0.2.1", 4) == [401, 401, 401, 429]
        other = api.client.get("/v1/nodes", headers={**basic(),
                                                     "X-Forwarded-For": "192.0.2.2"})
        assert other.status_code == (200 if parsing else 429)
        # RFC 7239 too: the last entry is the proxy's, the first one the client's claim.
        for chain, behind in (("for=192.0.2.1, for=192.0.2.5", 401),
                              ("for=192.0.2.5, for=192.0.2.1", 429)):
            resp = api.client.get("/v1/nodes", headers={**basic(USER, "wrong"),
                                                        "Forwarded": chain})
            assert resp.status_code == (behind if parsing else 429), chain
    finally:
        api.close()


def test_failures_as_one_user_do_not_throttle_another_at_the_same_address(tmp_path, db,
                                                                         htpasswd):
    api = Api(api_conf(tmp_path, db, api={"auth_strategy": "http_basic",
                                          "http_basic_auth_user_file": htpasswd,
                                          "auth_max_failures": 3}))
    try:
        # Someone behind the same address (NAT, proxy) guesses another user's password.
        assert _fail(api, "", 4, user="other") == [401, 401, 401, 429]
        # Before: 429 too, unless the admin had logged in from there since the API started.
        assert api.client.get("/v1/nodes", headers=basic()).status_code == 200
        # The guessed user from that address waits out the window, right password or not.
        refused = api.client.get("/v1/nodes", headers=basic("other", "pw2"))
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
        assert "3 failed logins as this user from this address" in error_message(refused)
        scraped = api.client.get("/metrics", headers=basic()).text.splitlines()
        counts = {line.split("{")[1].split("}")[0]: float(line.split()[-1]) for line in scraped
                  if line.startswith("ironic_inspection_logins_total{")}
        assert counts['outcome="throttled"'] >= 2 and counts['outcome="failed"'] >= 3, counts
    finally:
        api.close()
