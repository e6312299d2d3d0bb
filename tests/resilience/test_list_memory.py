"""Response memory is bounded: nodes and ports are no larger on create than a PATCH allows,
and list pages stop at [api]max_page_bytes, so four concurrent full-detail pages of the
largest nodes allowed cost the API tens of MB, not gigabytes."""

import base64
import concurrent.futures
import os
from pathlib import Path

import pytest
import requests

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support.services_procs import API_HEADERS, start_api

NODES = 60
#: Just under [inspection_rules]max_node_size (1 MiB of JSON), incompressible.
LARGE = base64.b64encode(os.urandom(760_000)).decode()


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("list-memory")
    url = f"sqlite:///{tmp}/inspection.sqlite"
    migration.upgrade(create_engine(url))
    server = start_api(tmp, url)
    try:
        server.wait_ready()
        yield server
    finally:
        assert server.stop() == 0, server.log_text()


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def test_nodes_and_ports_over_max_node_size_are_refused_on_create(api):
    big = {"blob": "x" * 3_000_000}
    resp = requests.post(f"{api.url}/v1/nodes", json={"driver": "ipmi", "extra": big},
                         timeout=60)
    assert resp.status_code == 400, resp.text
    assert "[inspection_rules]max_node_size = 1048576" in resp.text
    node = requests.post(f"{api.url}/v1/nodes", json={"driver": "ipmi"}, timeout=30).json()
    resp = requests.post(f"{api.url}/v1/ports", timeout=60, json={
        "node_uuid": node["uuid"], "address": "52:54:00:aa:bb:01", "extra": big})
    assert resp.status_code == 400, resp.text
    assert "max_node_size" in resp.text
    assert requests.get(f"{api.url}/v1/ports", timeout=30).json()["ports"] == []
    requests.delete(f"{api.url}/v1/nodes/{node['uuid']}", timeout=30)


def test_four_concurrent_detail_pages_of_the_largest_nodes_stay_bounded(api):
    session = requests.Session()
    session.headers.update(API_HEADERS)  # node names need 1.5
    for n in range(NODES):
        resp = session.post(f"{api.url}/v1/nodes", timeout=60, json={
            "driver": "ipmi", "name": f"large-{n}", "extra": {"blob": LARGE}})
        assert resp.status_code == 201, resp.text[:300]
    # Everything shown in a brief list is small: one page holds every node.
    brief = session.get(f"{api.url}/v1/nodes", timeout=60).json()
    assert len(brief["nodes"]) == NODES and "next" not in brief

    def walk(_: int) -> tuple[int, int]:
        url, seen, pages = f"{api.url}/v1/nodes/detail", 0, 0
        while url:
            body = requests.get(url, timeout=120).json()
            assert all(node["extra"]["blob"] == LARGE for node in body["nodes"])
            seen, pages, url = seen + len(body["nodes"]), pages + 1, body.get("next")
        return seen, pages

    before = _kib(api.pid, "VmRSS")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        walks = list(pool.map(walk, range(4)))
    peak = _kib(api.pid, "VmHWM")
    print(f"4 concurrent walks of /v1/nodes/detail over {NODES} nodes of 1 MB: {walks} "
          f"(nodes, pages); API RSS {before / 1024:.0f} MiB before, peak "
          f"{peak / 1024:.0f} MiB (+{(peak - before) / 1024:.0f} MiB)")
    assert walks == [(NODES, 8)] * 4  # 8 MiB pages: 8 nodes each (the last: 4)
    # Before: one page of 60 such nodes took +230 MB; four at once took the API to 837 MB.
    assert (peak - before) / 1024 < 250, (before, peak)
