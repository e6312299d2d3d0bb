"""Bounds on what one anonymous ramdisk callback can make the service compute and store."""

import time

import pytest
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.pipeline_support import body


def many_nics(count: int, pxe_index: int = 0) -> dict:
    """A real inventory with ``count`` interfaces, the ``pxe_index``-th one PXE booted."""
    data = body("bios-vm-x86_64")
    interfaces = [{"name": f"eth{i}", "mac_address": f"52:54:{i >> 24 & 255:02x}:"
                   f"{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}",
                   "ipv4_address": None} for i in range(1, count + 1)]
    data["inventory"]["interfaces"] = interfaces
    data["inventory"]["boot"] = {"current_boot_mode": "bios",
                                 "pxe_interface": interfaces[pxe_index]["mac_address"]}
    data["inventory"].pop("bmc_address", None)
    return data


def counts(engine) -> tuple[int, int]:
    with engine.connect() as conn:
        return (conn.execute(sa.select(sa.func.count()).select_from(Node)).scalar(),
                conn.execute(sa.select(sa.func.count()).select_from(Port)).scalar())


@pytest.fixture
def sqlite_migrated(sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    engine.dispose()
    return sqlite_url


@pytest.fixture
def make_api(tmp_path, sqlite_migrated):
    apis = []

    def make(**groups):
        groups.setdefault("auto_discovery", {"enabled": "true"})
        api = Api(api_conf(tmp_path, sqlite_migrated, **groups))
        apis.append(api)
        return api

    yield make
    for api in apis:
        api.close()


def test_20000_nics_are_refused_at_once(make_api):
    api = make_api()
    started = time.monotonic()
    resp = api.client.post("/v1/continue_inspection", json=many_nics(20000))
    elapsed = time.monotonic() - started
    assert resp.status_code == 400, resp.json
    assert "20000 network interfaces" in error_message(resp)
    assert "[api]max_callback_interfaces" in error_message(resp)
    assert elapsed < 3, elapsed
    assert counts(api.context.engine) == (0, 0)


def test_20000_nics_allowed_are_deduplicated_quickly_and_get_one_port(make_api):
    # Raised limit: what remains is linear-time de-duplication and add_ports=pxe.
    api = make_api(api={"max_callback_interfaces": 30000})
    data = many_nics(20000, pxe_index=7)
    data["inventory"]["interfaces"] += data["inventory"]["interfaces"][:5000]  # duplicates
    started = time.monotonic()
    resp = api.client.post("/v1/continue_inspection", json=data)
    elapsed = time.monotonic() - started
    assert resp.status_code == 202, resp.json
    assert elapsed < 3, elapsed
    api.wait_processed()
    ports = api.client.get(f"/v1/ports?node={resp.json['uuid']}").json["ports"]
    assert [p["address"] for p in ports] == [data["inventory"]["boot"]["pxe_interface"]]


@pytest.mark.parametrize("mode, expected", [("pxe", 1), ("active", 2), ("all", 6),
                                            ("disabled", 0)])
def test_discovery_honours_add_ports(make_api, mode, expected):
    api = make_api(inspector={"add_ports": mode})
    data = many_nics(6, pxe_index=2)
    for iface in data["inventory"]["interfaces"][2:4]:
        iface["ipv4_address"] = "192.0.2.10"
    resp = api.client.post("/v1/continue_inspection", json=data)
    assert resp.status_code == 202, resp.json
    with api.context.engine.connect() as conn:  # enrolled ports, before processing
        enrolled = conn.execute(sa.select(sa.func.count()).select_from(Port)).scalar()
    assert enrolled == expected
    api.wait_processed()
    assert api.client.get("/v1/nodes").json["nodes"][0]["uuid"] == resp.json["uuid"]
