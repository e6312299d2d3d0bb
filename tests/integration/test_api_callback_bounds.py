"""Bounds on what one anonymous ramdisk callback can make the service compute and store."""

import concurrent.futures
import time

import pytest
import requests
import sqlalchemy as sa

from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter.common.database import create_engine
from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.pipeline_support import body
from tests.support.services_procs import start_api


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
    resp = api.unversioned.post("/v1/continue_inspection", json=many_nics(20000))
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
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
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
    resp = api.unversioned.post("/v1/continue_inspection", json=data)
    assert resp.status_code == 202, resp.json
    with api.context.engine.connect() as conn:  # enrolled ports, before processing
        enrolled = conn.execute(sa.select(sa.func.count()).select_from(Port)).scalar()
    assert enrolled == expected
    api.wait_processed()
    assert api.client.get("/v1/nodes").json["nodes"][0]["uuid"] == resp.json["uuid"]


def _metric(api, name: str) -> float:
    text = api.client.get("/metrics").get_data(as_text=True)
    return float(next(x for x in text.splitlines() if x.startswith(name + " ")).split()[-1])


def test_a_burst_from_one_address_meets_429_and_the_admin_api_stays(make_api):
    api = make_api()
    refusals = 'ironic_inspection_callback_refusals_total{reason="rate_limit"}'
    before = _metric(api, refusals)
    statuses = []
    for index in range(300):
        data = many_nics(1)
        data["inventory"]["interfaces"][0]["mac_address"] = f"52:54:00:aa:{index >> 8:02x}:" \
                                                            f"{index & 255:02x}"
        data["inventory"]["boot"]["pxe_interface"] = data["inventory"]["interfaces"][0][
            "mac_address"]
        resp = api.unversioned.post("/v1/continue_inspection", json=data)
        statuses.append(resp.status_code)
        if resp.status_code == 429:
            assert int(resp.headers["Retry-After"]) >= 1
            assert "Too many inspection callbacks" in error_message(resp)
        if index % 50 == 0:
            assert api.client.get("/v1/nodes?limit=1").status_code == 200
    accepted = statuses.count(202)
    assert set(statuses) == {202, 429}
    assert 50 <= accepted < 100, accepted  # the burst, and what the rate refilled meanwhile
    assert statuses[:50] == [202] * 50
    api.wait_processed()
    assert counts(api.context.engine)[0] == accepted
    assert _metric(api, refusals) == before + 300 - accepted
    assert api.client.get("/v1/nodes?limit=1").status_code == 200


def test_a_rack_booting_together_is_never_limited(make_api):
    api = make_api()
    for index in range(60):  # more machines than one address's burst
        data = many_nics(1)
        mac = f"52:54:00:bb:00:{index:02x}"
        data["inventory"]["interfaces"][0]["mac_address"] = mac
        data["inventory"]["boot"]["pxe_interface"] = mac
        for attempt in range(2):  # the first callback and a retry of it
            resp = api.unversioned.post("/v1/continue_inspection", json=data,
                                   environ_base={"REMOTE_ADDR": f"192.0.2.{index + 1}"})
            assert resp.status_code == (202 if attempt == 0 else 404), resp.json
    api.wait_processed()
    assert counts(api.context.engine) == (60, 60)


def test_a_concurrent_burst_against_the_real_server_leaves_the_admin_api_served(
        tmp_path, sqlite_migrated):
    api = start_api(tmp_path, sqlite_migrated, extra_conf={"auto_discovery": {"enabled": True}})
    try:
        api.wait_ready()

        def post(index: int) -> int:
            data = many_nics(1)
            mac = f"52:54:00:cc:{index >> 8:02x}:{index & 255:02x}"
            data["inventory"]["interfaces"][0]["mac_address"] = mac
            data["inventory"]["boot"]["pxe_interface"] = mac
            resp = requests.post(f"{api.url}/v1/continue_inspection", json=data, timeout=30)
            if resp.status_code == 429:
                assert int(resp.headers["Retry-After"]) >= 1
            return resp.status_code

        admin = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            burst = [pool.submit(post, i) for i in range(300)]
            while not all(f.done() for f in burst):
                started = time.monotonic()
                status = requests.get(f"{api.url}/v1/nodes?limit=1", timeout=30).status_code
                admin.append((status, time.monotonic() - started))
            statuses = [f.result() for f in burst]
        assert set(statuses) == {202, 429} and statuses.count(202) < 100
        assert admin and all(status == 200 for status, _ in admin)
        assert max(seconds for _, seconds in admin) < 5, admin
        nodes = requests.get(f"{api.url}/v1/nodes", timeout=30).json()["nodes"]
        assert len(nodes) == statuses.count(202)
    finally:
        api.stop()


def test_behind_a_proxy_the_rate_limit_keys_on_the_address_the_proxy_saw(make_api):
    api = make_api(api={"callback_burst": 2, "callback_rate": 0.01},
                   auto_discovery={"enabled": "false"},
                   oslo_middleware={"enable_proxy_headers_parsing": "true"})
    data = body("bios-vm-x86_64")  # unknown: 404, but counted first
    # The client claims a new address each time; the proxy appends the one it saw.
    statuses = [api.unversioned.post("/v1/continue_inspection", json=data, headers={
        "X-Forwarded-For": f"198.51.100.{n}, 192.0.2.9"}).status_code for n in range(3)]
    assert statuses == [404, 404, 429]
    other = api.unversioned.post("/v1/continue_inspection", json=data,
                            headers={"X-Forwarded-For": "192.0.2.10"})
    assert other.status_code == 404  # another machine behind the same proxy
