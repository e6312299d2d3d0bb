"""Ramdisk callbacks for tests that kill processes: IPA-shaped bodies, concurrent posting,
and what the database and the logs say about each node afterwards."""

import concurrent.futures
import copy
import json
import re
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import requests
import sqlalchemy as sa

from inspection.db.models import Node, Port

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/inventories/bios-vm-x86_64.json"
#: Logged by the processing service once a node's results are committed.
FINISHED = re.compile(r"Inspection of node ([0-9a-f-]{36}) finished")
#: Logged when data arrives for a node that was already processed (a duplicate run).
REFUSED = "Not processing inspection data for node"


def machine_macs(count: int, prefix: str = "52:54:00:d1") -> list[str]:
    """``count`` distinct MACs."""
    return [f"{prefix}:{i // 256:02x}:{i % 256:02x}" for i in range(count)]


def callback_body(mac: str) -> dict:
    """IPA inspection data of a one-NIC machine that boots from ``mac``."""
    body = copy.deepcopy(json.loads(FIXTURE.read_text()))
    inventory = body["inventory"]
    inventory["interfaces"] = [inventory["interfaces"][0], {
        **inventory["interfaces"][1], "name": "eth0", "mac_address": mac}]
    inventory["boot"] = {"current_boot_mode": "bios", "pxe_interface": mac}
    inventory["bmc_address"] = "0.0.0.0"
    return body


def post_callbacks(url: str, macs: Iterable[str], threads: int = 32) -> list:
    """POST one callback per MAC concurrently; a response or the exception per MAC."""
    def post(mac: str):
        try:
            return requests.post(f"{url}/v1/continue_inspection", json=callback_body(mac),
                                 timeout=60)
        except requests.RequestException as exc:
            return exc

    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(post, macs))


def nodes_of(engine, macs: list[str]) -> list:
    """(uuid, provision_state, inspection_finished_at, last_error, address) of every node
    owning one of ``macs``."""
    with engine.connect() as conn:
        return conn.execute(
            sa.select(Node.uuid, Node.provision_state, Node.inspection_finished_at,
                      Node.last_error, Port.address)
            .join(Port, Port.node_id == Node.id).where(Port.address.in_(macs))).all()


def wait_finished(engine, macs: list[str], deadline: float) -> list:
    """Poll until every MAC's node has finished inspection or ``deadline`` (monotonic)."""
    while True:
        rows = nodes_of(engine, macs)
        if sum(1 for r in rows if r.inspection_finished_at) >= len(macs) \
                or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def finished_counts(logs: Iterable[str]) -> Counter:
    """How many times each node's processing was committed, according to the logs."""
    return Counter(uuid for log in logs for uuid in FINISHED.findall(log))
