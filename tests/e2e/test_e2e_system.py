"""The whole system at once: API + two workers + RabbitMQ + PostgreSQL + ironic-pxe-filter +
a real dnsmasq answering DHCP in network namespaces.

One system serves the module (auto-discovery on, the shipped built-in rule
etc/ironic-inspection/rules/discovered-ipmi.yaml, a filter whose periodic sync is an hour
away, so only broadcasts change what dnsmasq answers). Machines are MAC addresses that send
real DHCPDISCOVERs and post IPA-shaped inspection data to /v1/continue_inspection.
"""

import concurrent.futures
import copy
import json
import time
import types
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from inspection.cli import main as cli_main
from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter.common.database import create_engine
from tests.support import netns, services
from tests.support.daemon import start_filter
from tests.support.services_procs import API_HEADERS, ONE_ADDRESS_RACK, start_api, start_worker

pytestmark = [pytest.mark.netns, pytest.mark.slow]
pytest_plugins = ["tests.support.dhcp_fixtures"]

REPO = Path(__file__).resolve().parents[2]
BUILT_IN_RULES = REPO / "etc" / "ironic-inspection" / "rules" / "discovered-ipmi.yaml"
FIXTURE = json.loads((REPO / "tests/fixtures/inventories/bios-vm-x86_64.json").read_text())
CONTROL = "52:54:00:e2:ff:ff"  # never enrolled: always served (discovery on)


def callback_body(mac: str, bmc: str, extra_macs: tuple[str, ...] = ()) -> dict:
    """IPA inspection data of a one-NIC (plus ``extra_macs``) machine with BMC ``bmc``."""
    body = copy.deepcopy(FIXTURE)
    inventory = body["inventory"]
    nics = [mac, *extra_macs]
    inventory["interfaces"] = [inventory["interfaces"][0]] + [
        {**inventory["interfaces"][1], "name": f"eth{i}", "mac_address": m,
         "ipv4_address": f"10.9.{i}.{int(m[-2:], 16)}"} for i, m in enumerate(nics)]
    inventory["boot"] = {"current_boot_mode": "bios", "pxe_interface": mac}
    inventory["bmc_address"] = bmc
    return body


@pytest.fixture(scope="module")
def system(tmp_path_factory, netns_pair):
    """The running system; stops everything (and checks clean exits) at the end."""
    tmp = tmp_path_factory.mktemp("e2e")
    vhost = services.create_vhost()
    db_url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    engine = create_engine(db_url)
    migration.upgrade(engine)
    hostsdir = tmp / "hostsdir"
    hostsdir.mkdir()
    # add_ports = all: a discovered machine's every NIC gets a port, so dnsmasq refuses them
    # all once it is processed (the default, pxe, leaves the other NICs unknown).
    conf = {"auto_discovery": {"enabled": True},
            "inspector": {"add_ports": "all"},
            "inspection_rules": {"built_in_rules": str(BUILT_IN_RULES)}}
    procs = []
    dnsmasq = None
    try:
        filt = start_filter(tmp, db_url, hostsdir, transport_url=vhost,
                            extra_conf={**conf, "pxe_filter": {"sync_period": 3600}})
        procs.append(filt)
        workers = [start_worker(tmp, db_url, vhost, conf, name=f"worker{i}") for i in (1, 2)]
        procs += workers
        filt.wait_ready(30)
        for worker in workers:
            worker.wait_ready(30)  # consuming: the task queue exists before the API casts
        # The 200 "machines" below all post from 127.0.0.1.
        api = start_api(tmp, db_url, vhost, {**conf, "api": ONE_ADDRESS_RACK})
        procs.append(api)
        api.wait_http()
        dnsmasq = netns.Dnsmasq.for_hostsdir(netns_pair, tmp / "dnsmasq", hostsdir).start()
        yield types.SimpleNamespace(api=api, workers=workers, filter=filt, engine=engine,
                                    url=api.url)
        for proc in (api, *workers):
            assert proc.stop() == 0, proc.log_text()
    finally:
        if dnsmasq is not None:
            dnsmasq.stop()
        for proc in procs:
            proc.stop()
        engine.dispose()
        services.drop_database(services.PG_ADMIN_URL, db_url)
        services.delete_vhost(vhost)


def cli(system, *argv: str) -> object:
    """Run ``ironic-inspection ... -f json`` against the system's API; the decoded output."""
    import contextlib  # noqa: PLC0415
    import io  # noqa: PLC0415

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main([*argv, "--url", system.url, "-f", "json"])
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())


def wait_node(url: str, ident: str, predicate, timeout: float = 20.0) -> dict:
    """Poll GET /v1/nodes/{ident} until ``predicate(node)``; the node."""
    deadline = time.monotonic() + timeout
    while True:
        node = requests.get(f"{url}/v1/nodes/{ident}", headers=API_HEADERS, timeout=5).json()
        if predicate(node):
            return node
        assert time.monotonic() < deadline, f"node never reached the state: {node}"
        time.sleep(0.05)


def test_unknown_machine_is_discovered_configured_and_closed_out(system, dhcp_client):
    mac, second = "52:54:00:e2:00:01", "52:54:00:e2:00:02"
    assert dhcp_client.discover(mac) is not None  # unknown, discovery on: it may boot

    answer = requests.post(f"{system.url}/v1/continue_inspection",
                           json=callback_body(mac, "192.0.2.41", (second,)), timeout=10)
    assert answer.status_code == 202, answer.text
    node_uuid = answer.json()["uuid"]
    node = wait_node(system.url, node_uuid, lambda n: n["inspection_finished_at"])
    # Within a second of processing being visible, dnsmasq refuses the machine's MACs.
    closed = dhcp_client.await_offer(mac, offered=False, within=1.0, control=CONTROL)
    assert dhcp_client.discover(second, control=CONTROL) is None

    assert node["auto_discovered"] is True and node["last_error"] is None
    assert node["driver"] == "ipmi"  # the built-in rule
    assert node["driver_info"]["ipmi_address"] == "192.0.2.41"
    assert node["driver_info"]["ipmi_password"] == "******"
    listed = cli(system, "node", "list", "--auto-discovered")
    assert [n["uuid"] for n in listed].count(node_uuid) == 1
    time.sleep(1.0)  # and it stays refused
    assert dhcp_client.discover(mac, control=CONTROL) is None
    print(f"discovered machine refused {closed * 1000:.0f} ms after processing was seen")


def test_enrolled_node_inspection_opens_then_closes_dhcp(system, dhcp_client, tmp_path):
    mac = "52:54:00:e2:10:01"
    rule = cli(system, "rule", "create", "--description", "e2e: record the architecture",
               "--actions", json.dumps([{"op": "set-attribute", "args": [
                   "/extra/e2e_arch", "{inventory[cpu][architecture]}"]}]))
    node = cli(system, "node", "create", "--driver", "ipmi", "--name", "e2e-enrolled")
    cli(system, "port", "create", mac, "--node", "e2e-enrolled")
    # Discovery is on, so the wildcard serves unknown MACs: creating the port must close
    # this one at once (a deny broadcast), not at the filter's next full sync.
    dhcp_client.await_offer(mac, offered=False, within=1.0, control=CONTROL)
    cli(system, "node", "manage", "e2e-enrolled")

    assert cli(system, "node", "inspect", "e2e-enrolled")["provision_state"] == "inspect wait"
    opened = dhcp_client.await_offer(mac, offered=True, within=1.0)

    answer = requests.post(f"{system.url}/v1/continue_inspection",
                           json=callback_body(mac, "0.0.0.0"), timeout=10)
    assert answer.status_code == 202 and answer.json()["uuid"] == node["uuid"]
    done = wait_node(system.url, node["uuid"], lambda n: n["provision_state"] != "inspect wait")
    closed = dhcp_client.await_offer(mac, offered=False, within=1.0, control=CONTROL)
    assert done["provision_state"] == "manageable", done["last_error"]
    assert done["properties"]["cpu_arch"] == "x86_64"       # a hook
    assert done["extra"]["e2e_arch"] == "x86_64"            # a rule
    assert done["auto_discovered"] is False and done["driver_info"] == {}  # built-in: no
    saved = tmp_path / "inventory.json"
    assert cli_main(["node", "inventory", "save", "e2e-enrolled", "--file", str(saved),
                     "--url", system.url]) == 0
    assert json.loads(saved.read_text())["inventory"]["boot"]["pxe_interface"] == mac
    cli_main(["rule", "delete", rule["uuid"], "--url", system.url])
    print(f"inspect -> offer {opened * 1000:.0f} ms; processed -> refused {closed * 1000:.0f} ms")


def test_two_hundred_concurrent_callbacks_through_two_workers(system):
    macs = [f"52:54:00:e3:{i // 256:02x}:{i % 256:02x}" for i in range(200)]
    start = time.monotonic()

    def post(index: int) -> requests.Response | Exception:
        try:
            return requests.post(f"{system.url}/v1/continue_inspection", timeout=30,
                                 json=callback_body(macs[index], f"192.0.3.{index % 250 + 1}"))
        except requests.RequestException as exc:
            return exc

    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        answers = list(pool.map(post, range(200)))
    accepted = time.monotonic() - start
    failed = [a for a in answers if isinstance(a, Exception) or a.status_code != 202]
    if any(isinstance(a, Exception) for a in failed):
        system.api.dump_stacks()  # a hang: keep the evidence in api.log
    assert not failed, (len(failed), sorted({str(a)[:200] if isinstance(a, Exception)
                                             else f"{a.status_code} {a.text}" for a in failed}))
    uuids = [a.json()["uuid"] for a in answers]
    assert len(set(uuids)) == 200  # one node per machine

    deadline = time.monotonic() + 60
    while True:
        with system.engine.connect() as conn:
            rows = conn.execute(
                sa.select(Node.uuid, Node.inspection_finished_at, Node.last_error,
                          Node.driver, Port.address)
                .join(Port, Port.node_id == Node.id).where(Port.address.in_(macs))).all()
        finished = [r for r in rows if r.inspection_finished_at is not None]
        if len(finished) == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    processed = time.monotonic() - start
    assert len(rows) == 200 and len({r.uuid for r in rows}) == 200  # no duplicate node
    assert {r.uuid for r in rows} == set(uuids)
    assert len(finished) == 200, f"{200 - len(finished)} callback(s) never processed"
    assert all(r.last_error is None and r.driver == "ipmi" for r in rows)
    shares = [w.log_text().count("Inspection of node") for w in system.workers]
    assert all(share > 0 for share in shares), shares  # both workers took tasks
    print(f"200 callbacks: accepted in {accepted:.1f} s, all processed in {processed:.1f} s, "
          f"worker shares {shares}")
