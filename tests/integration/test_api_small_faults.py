"""Small faults answered as documented: a read-only database makes the callback answer 503
(not 500), a CHECK violation is not called a name conflict, no "bytes bytes"."""

import pytest
import sqlalchemy as sa

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.node_factory import add_node
from tests.integration.pipeline_support import body
from tests.support import services

DELL = "uefi-dell-r640"
MAC = "b0:7b:25:d3:0a:11"


@pytest.fixture
def pg(tmp_path):
    url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    engine = create_engine(url)
    migration.upgrade(engine)
    yield url, engine
    engine.dispose()
    services.drop_database(services.PG_ADMIN_URL, url)


@pytest.mark.parametrize("discovery", [False, True], ids=["known-node", "discovery"])
def test_a_read_only_database_makes_the_callback_answer_503(pg, tmp_path, discovery):
    url, engine = pg
    if not discovery:
        add_node(engine, macs=[MAC], inspect_interface="agent")
    api = Api(api_conf(tmp_path, url, auto_discovery={"enabled": discovery}))
    try:
        # As a failover to a standby does: the database now refuses every write.
        name = sa.engine.make_url(url).database
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text(f"ALTER DATABASE {name} SET default_transaction_read_only "
                                 f"= on"))
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE datname = :name AND pid <> pg_backend_pid()"),
                         {"name": name})
        resp = api.unversioned.post("/v1/continue_inspection", json=body(DELL))
    finally:
        api.close()
    assert resp.status_code == 503, resp.json
    assert "Internal server error" not in error_message(resp)


def test_a_check_violation_is_not_called_a_name_conflict(pg, tmp_path):
    url, engine = pg
    with engine.begin() as conn:  # as a shared Ironic schema may hold
        conn.execute(sa.text("ALTER TABLE nodes ADD CONSTRAINT nodes_short_description "
                             "CHECK (length(description) < 20)"))
    api = Api(api_conf(tmp_path, url))
    try:
        node = api.client.post("/v1/nodes", json={"driver": "ipmi", "name": "n1"}).json
        resp = api.client.patch(f"/v1/nodes/{node['uuid']}", json=[
            {"op": "add", "path": "/description", "value": "a description far too long"}],
            headers={"X-OpenStack-Ironic-API-Version": "1.51"})
        assert resp.status_code == 400, resp.json
        message = error_message(resp)
        assert "already exists" not in message and "nodes_short_description" in message
        assert "far too long" not in message  # the row's values are not quoted
        resp = api.client.post("/v1/nodes", json={"driver": "ipmi", "description": "x" * 30},
                               headers={"X-OpenStack-Ironic-API-Version": "1.51"})
        assert resp.status_code == 400 and "already exists" not in error_message(resp)
        duplicate = api.client.post("/v1/nodes", json={"driver": "ipmi", "name": "n1"})
        assert duplicate.status_code == 409, duplicate.json
        assert "already exists" in error_message(duplicate)
    finally:
        api.close()


def test_a_rule_patch_over_the_limit_says_bytes_once(sqlite_url, tmp_path):
    migration.upgrade(create_engine(sqlite_url))
    api = Api(api_conf(tmp_path, sqlite_url, api={"max_request_body_size": 65536}))
    try:
        rule = api.client.post("/v1/inspection_rules", json={
            "actions": [{"op": "set-attribute", "args": ["/extra/a", "x" * 30_000]}]}).json
        resp = api.client.patch(f"/v1/inspection_rules/{rule['uuid']}", json=[
            {"op": "copy", "from": "/actions/0", "path": "/actions/-"},
            {"op": "copy", "from": "/actions/0", "path": "/actions/-"}])
        assert resp.status_code == 400, resp.json
        assert "more than 65536 bytes of JSON" in resp.text and "bytes bytes" not in resp.text
    finally:
        api.close()
