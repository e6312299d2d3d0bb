"""Inside an OpenStack cloud: a real Keystone, the API in its catalog, Ironic's policies.

One Keystone (SQLite, fernet tokens) and one API process (``[api]auth_strategy = keystone``)
serve the whole module. The ``baremetal`` CLI and openstacksdk log in with a password from
``clouds.yaml`` and find the API through the catalog (service type ``baremetal``): no endpoint
is given to them.
"""

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.clients.runners import CLIENT_TIMEOUT, HERE, SdkResult, call, client_env
from tests.support.identity import REGION, Keystone
from tests.support.processes import ServiceProcess
from tests.support.services_procs import API_HEADERS, free_port, start_api

PASSWORD = "cloud-user-pass"
SERVICE_PASSWORD = "inspection-service-pass"
RULE_ACTIONS = [{"op": "set-attribute", "args": {"path": "/properties/rack", "value": "r1"}}]

#: clouds.yaml entries: name -> (user, project or None for system scope).
CLOUDS = {"sysadmin": ("admin", None), "auditor": ("auditor", None),
          "a-admin": ("a-admin", "tenant-a"), "a-member": ("a-member", "tenant-a"),
          "b-member": ("b-member", "tenant-b")}


@dataclass
class Cloud:
    """The running Keystone and API, and the clients' home with clouds.yaml."""

    keystone: Keystone
    api: ServiceProcess
    projects: dict[str, str]
    db: str
    home: Path
    clients_bin: Path

    def baremetal(self, cloud: str, *args: str) -> subprocess.CompletedProcess:
        """``baremetal --os-cloud <cloud> ...``: whatever it exits with."""
        return subprocess.run([str(self.clients_bin / "baremetal"), "--os-cloud", cloud,
                               *args], capture_output=True, text=True,
                              env=client_env(self.home), timeout=CLIENT_TIMEOUT)

    def names(self, cloud: str) -> set[str]:
        """Names of the nodes ``baremetal node list`` shows to ``cloud``'s user."""
        listed = self.ok(cloud, "node", "list", "--limit", "0", "--fields", "uuid", "name")
        return {node["name"] for node in listed}

    def ok(self, cloud: str, *args: str) -> object:
        """A ``-f json`` command that must succeed; its parsed output."""
        proc = self.baremetal(cloud, *args, "-f", "json")
        assert proc.returncode == 0, proc.stderr + proc.stdout
        return json.loads(proc.stdout)

    def refused(self, cloud: str, *args: str) -> str:
        """A command that must fail cleanly; what it printed."""
        proc = self.baremetal(cloud, *args)
        assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc.stderr

    def sdk(self, cloud: str, *calls: dict) -> SdkResult:
        """openstacksdk calls, connected with ``openstack.connect(cloud=...)``."""
        command = {"endpoint": None, "auth": None, "cloud": cloud, "calls": list(calls)}
        proc = subprocess.run([str(self.clients_bin / "python"), str(HERE / "sdk_script.py")],
                              input=json.dumps(command), capture_output=True, text=True,
                              env=client_env(self.home), timeout=CLIENT_TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        return SdkResult(json.loads(proc.stdout)["results"])


def _clouds_yaml(keystone: Keystone, home: Path) -> None:
    clouds = {}
    for name, (user, project) in CLOUDS.items():
        auth = {"auth_url": keystone.auth_url, "username": user, "user_domain_id": "default",
                "password": keystone.admin_password if user == "admin" else PASSWORD}
        if project is None:
            auth["system_scope"] = "all"
        else:
            auth.update(project_name=project, project_domain_id="default")
        clouds[name] = {"auth_type": "password", "auth": auth, "region_name": REGION,
                       "identity_api_version": 3}
    path = home / ".config" / "openstack" / "clouds.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"clouds": clouds}))


@pytest.fixture(scope="module")
def cloud(clients_bin, tmp_path_factory) -> Iterator[Cloud]:
    """Keystone with users of every persona, the API registered in its catalog."""
    keystone = Keystone(tmp_path_factory.mktemp("keystone"))
    api = None
    try:
        keystone.start()
        port = free_port()
        workdir = tmp_path_factory.mktemp("api")
        db = f"sqlite:///{workdir}/inspection.sqlite"
        engine = create_engine(db)
        migration.upgrade(engine)
        engine.dispose()
        api = start_api(workdir, db, port=port,
                        extra_conf={
                            "api": {"auth_strategy": "keystone"},
                            "keystone_authtoken": {
                                "auth_type": "password", "auth_url": keystone.auth_url,
                                "www_authenticate_uri": keystone.auth_url,
                                "username": "inspection", "password": SERVICE_PASSWORD,
                                "user_domain_id": "default", "project_name": "service",
                                "project_domain_id": "default", "region_name": REGION}})
        # Keystone is set up while the API starts: it asks Keystone only on a request.
        user = {"password": PASSWORD}
        made = keystone.setup(clients_bin, {
            "projects": ["service", "tenant-a", "tenant-b"],
            "users": [
                {"name": "inspection", "password": SERVICE_PASSWORD, "project": "service",
                 "roles": ["service"]},
                {"name": "auditor", **user, "system_roles": ["reader"]},
                {"name": "a-admin", **user, "project": "tenant-a", "roles": ["admin"]},
                {"name": "a-member", **user, "project": "tenant-a", "roles": ["member"]},
                {"name": "b-member", **user, "project": "tenant-b", "roles": ["member"]},
            ],
            "services": [{"type": "baremetal", "name": "ironic-inspection",
                          "url": f"http://127.0.0.1:{port}"}],
        })
        api.wait_ready()
        home = tmp_path_factory.mktemp("home")
        _clouds_yaml(keystone, home)
        yield Cloud(keystone, api, made["projects"], db, home, clients_bin)
    finally:
        if api is not None:
            assert api.stop() == 0, api.log_text()
            assert "Traceback" not in api.log_text(), api.log_text()
        keystone.stop()


def test_admin_drives_nodes_ports_and_rules_through_the_catalog(cloud):
    node = cloud.ok("sysadmin", "node", "create", "--driver", "fake-hardware",
                    "--name", "ks-admin-node")
    port = cloud.ok("sysadmin", "port", "create", "52:54:00:0a:00:01", "--node", node["uuid"])
    assert port["node_uuid"] == node["uuid"]
    rule = cloud.ok("sysadmin", "inspection", "rule", "create", "--description", "ks rule",
                    "--actions", json.dumps(RULE_ACTIONS))
    proc = cloud.baremetal("sysadmin", "node", "manage", node["uuid"])
    assert proc.returncode == 0, proc.stderr
    after = cloud.sdk("sysadmin", call("get_node", "ks-admin-node"),
                      call("inspection_rules"), call("delete_inspection_rule", rule["uuid"]))
    assert after.ok(0)["provision_state"] == "manageable"
    assert rule["uuid"] in {r["id"] for r in after.ok(1)}
    after.ok(2)


def test_sdk_finds_the_api_in_the_catalog_and_authenticates(cloud):
    result = cloud.sdk("sysadmin",
                       call("create_node", driver="fake-hardware", name="ks-sdk-node"),
                       call("nodes", details=True),
                       call("create_port", address="52:54:00:0a:00:02",
                            node_id="ks-sdk-node"),
                       call("ports", node="ks-sdk-node"),
                       call("endpoint_data"))
    created = result.ok(0)
    assert created["name"] == "ks-sdk-node"
    assert "ks-sdk-node" in {n["name"] for n in result.ok(1)}
    assert [p["address"] for p in result.ok(3)] == ["52:54:00:0a:00:02"]
    # No endpoint was given: the SDK found the API in the catalog, and its versions there.
    version = requests.get(cloud.api.url + "/v1", timeout=10).json()["version"]
    assert result.ok(4)["max_microversion"] == version["version"]


def test_system_reader_reads_and_is_refused_writes(cloud):
    node = cloud.sdk("sysadmin", call("create_node", driver="fake-hardware",
                                      name="ks-read-node")).ok()
    assert "ks-read-node" in cloud.names("auditor")
    refused = cloud.refused("auditor", "node", "create", "--driver", "fake-hardware")
    assert "HTTP 403" in refused and "baremetal:node:create" in refused, refused
    result = cloud.sdk("auditor", call("get_node", node["id"]), call("inspection_rules"),
                       call("update_node", node["id"], extra={"a": "b"}),
                       call("delete_node", node["id"]),
                       call("create_inspection_rule", actions=RULE_ACTIONS))
    assert result.ok(0)["name"] == "ks-read-node"
    result.ok(1)
    for index, rule in ((2, "baremetal:node:update_extra"), (3, "baremetal:node:delete"),
                        (4, "baremetal:inspection_rule:create")):
        error = result.error(index)
        assert error["status"] == 403 and rule in error["message"], error
    assert cloud.sdk("sysadmin", call("get_node", node["id"])).ok()["extra"] == {}


def test_refusals_use_ironic_errors_and_log_the_request_id(cloud):
    token = cloud.keystone.token("auditor", PASSWORD)
    answer = requests.post(cloud.api.url + "/v1/nodes", json={"driver": "fake-hardware"},
                           headers={"X-Auth-Token": token}, timeout=10)
    assert answer.status_code == 403
    fault = json.loads(answer.json()["error_message"])
    assert fault == {"faultstring": "Access was denied to the following resource: "
                                    "baremetal:node:create",
                     "faultcode": "Client", "debuginfo": None}
    request_id = answer.headers["x-openstack-request-id"]
    logged = [line for line in cloud.api.log_text().splitlines() if request_id in line]
    assert any("baremetal:node:create" in line for line in logged), logged
    assert token not in cloud.api.log_text()


def test_project_users_see_only_the_nodes_their_project_owns(cloud):
    # A project admin's node belongs to the project (Ironic's self_owned_node rule).
    made = cloud.sdk("a-admin", call("create_node", driver="fake-hardware",
                                     name="ks-tenant-a-node"),
                     call("create_port", address="52:54:00:0a:00:0a",
                          node_id="ks-tenant-a-node"))
    owned = made.ok(0)
    made.ok(1)  # the owner's admin may add ports
    system = cloud.sdk("sysadmin", call("create_node", driver="fake-hardware",
                                        name="ks-system-node")).ok()
    assert cloud.names("a-member") == {"ks-tenant-a-node"}
    hidden = cloud.refused("b-member", "node", "show", owned["id"])
    assert "HTTP 404" in hidden and "could not be found" in hidden, hidden
    member = cloud.sdk("a-member", call("get_node", owned["id"]),
                       call("get_node", system["id"]), call("delete_node", owned["id"]),
                       call("inspection_rules"), call("ports"))
    assert member.ok(0)["name"] == "ks-tenant-a-node"
    assert [p["address"] for p in member.ok(4)] == ["52:54:00:0a:00:0a"]
    assert member.error(1)["status"] == 404  # a node nobody owns is hidden too
    assert member.error(2)["status"] == 403  # members may not delete; project admins may
    assert member.error(3)["status"] == 403
    assert cloud.sdk("b-member", call("nodes")).ok() == []
    assert {"ks-tenant-a-node", "ks-system-node"} <= cloud.names("sysadmin")

    # Leased to tenant-b (set in the database: node fields are another change's), the node
    # shows to b's members, without its BMC details, as Ironic's defaults say.
    engine = create_engine(cloud.db)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE nodes SET lessee = :lessee, driver_info = :info "
                                   "WHERE uuid = :uuid"),
                           {"lessee": cloud.projects["tenant-b"], "uuid": owned["id"],
                            "info": json.dumps({"ipmi_address": "192.0.2.9"})})
    engine.dispose()
    lessee = cloud.sdk("b-member", call("nodes", details=True), call("get_node", owned["id"]),
                       call("delete_node", owned["id"]))
    assert [n["name"] for n in lessee.ok(0)] == ["ks-tenant-a-node"]
    assert "baremetal:node:get:driver_info" in lessee.ok(1)["driver_info"]["content"]
    assert lessee.error(2)["status"] == 403
    owner_view = cloud.sdk("a-member", call("get_node", owned["id"])).ok()
    assert owner_view["driver_info"] == {"ipmi_address": "192.0.2.9"}


def test_no_token_or_a_forged_one_is_refused_and_open_paths_stay_open(cloud):
    url = cloud.api.url
    for headers in ({}, {"X-Auth-Token": "gAAAAABforged-token"}):
        response = requests.get(url + "/v1/nodes", headers=headers, timeout=10)
        assert response.status_code == 401, response.text
        assert response.headers["WWW-Authenticate"].startswith("Keystone uri="), \
            response.headers
        fault = json.loads(response.json()["error_message"])
        assert fault["faultcode"] == "Client" and "token" in fault["faultstring"]
        assert response.headers["x-openstack-request-id"].startswith("req-")
    for path in ("/", "/v1", "/healthcheck"):
        assert requests.get(url + path, timeout=10).status_code == 200, path
    callback = requests.post(url + "/v1/continue_inspection", json={}, timeout=10)
    assert callback.status_code == 400, callback.text  # answered, not asked for a token


class _As:
    """Raw API calls with one user's token (every rule below is one request)."""

    def __init__(self, cloud: Cloud, user: str, project: str | None) -> None:
        password = cloud.keystone.admin_password if user == "admin" else PASSWORD
        self.url = cloud.api.url
        self.headers = {"X-Auth-Token": cloud.keystone.token(user, password, project),
                        "X-OpenStack-Ironic-API-Version": "1.81"}

    def __call__(self, method: str, path: str, body: object = None,
                 version: str = "1.81") -> requests.Response:
        headers = {**self.headers, "X-OpenStack-Ironic-API-Version": version}
        return requests.request(method, self.url + path, json=body, headers=headers,
                                timeout=30)


@pytest.fixture(scope="module")
def tenants(cloud):
    """tenant-a's node (with a port and a stored inventory), tenant-b's node, and callers."""
    callers = {"sys": _As(cloud, "admin", None), "a-admin": _As(cloud, "a-admin", "tenant-a"),
               "a-member": _As(cloud, "a-member", "tenant-a"),
               "b-member": _As(cloud, "b-member", "tenant-b")}
    nodes = {}
    for name, project in (("ten-a1", "tenant-a"), ("ten-a2", "tenant-a"),
                          ("ten-b", "tenant-b")):
        made = callers["sys"]("POST", "/v1/nodes", {"driver": "fake-hardware", "name": name,
                                                    "owner": cloud.projects[project]})
        assert made.status_code == 201, made.text
        nodes[name] = made.json()["uuid"]
    port = callers["a-admin"]("POST", "/v1/ports", {"node_uuid": nodes["ten-a1"],
                                                    "address": "52:54:00:0b:00:01"})
    assert port.status_code == 201, port.text
    engine = create_engine(cloud.db)
    with engine.begin() as connection:
        node_id = connection.execute(sa.text("SELECT id FROM nodes WHERE uuid = :uuid"),
                                     {"uuid": nodes["ten-a1"]}).scalar()
        connection.execute(sa.text("INSERT INTO node_inventory (node_id, inventory_data, "
                                   "plugin_data) VALUES (:id, :inventory, '{}')"),
                           {"id": node_id, "inventory": json.dumps({"cpu": {"count": 2}})})
    engine.dispose()
    return callers, nodes, port.json()["uuid"]


def _port_node(cloud, port_uuid: str) -> str:
    engine = create_engine(cloud.db)
    with engine.connect() as connection:
        node = connection.execute(sa.text(
            "SELECT nodes.uuid FROM ports JOIN nodes ON nodes.id = ports.node_id "
            "WHERE ports.uuid = :uuid"), {"uuid": port_uuid}).scalar()
    engine.dispose()
    return node


def test_a_project_admin_cannot_move_a_port_onto_another_projects_node(cloud, tenants):
    callers, nodes, port = tenants
    move = [{"op": "replace", "path": "/node_uuid", "value": nodes["ten-b"]}]
    refused = callers["a-admin"]("PATCH", f"/v1/ports/{port}", move)
    assert refused.status_code == 404, refused.text  # tenant-b's node is not even visible
    assert nodes["ten-b"] in json.loads(refused.json()["error_message"])["faultstring"]
    assert _port_node(cloud, port) == nodes["ten-a1"]
    # Leased to tenant-a, the node is visible, but only its owner's admin may add ports.
    lease = callers["sys"]("PATCH", f"/v1/nodes/{nodes['ten-b']}",
                           [{"op": "add", "path": "/lessee", "value": cloud.projects["tenant-a"]}])
    assert lease.status_code == 200, lease.text
    refused = callers["a-admin"]("PATCH", f"/v1/ports/{port}", move)
    assert refused.status_code == 403, refused.text
    assert "baremetal:port:update" in refused.text
    assert _port_node(cloud, port) == nodes["ten-a1"]
    # Between the project's own nodes the move is allowed, and the system admin moves back.
    within = callers["a-admin"]("PATCH", f"/v1/ports/{port}",
                                [{"op": "replace", "path": "/node_uuid",
                                  "value": nodes["ten-a2"]}])
    assert within.status_code == 200, within.text
    assert _port_node(cloud, port) == nodes["ten-a2"]
    back = callers["sys"]("PATCH", f"/v1/ports/{port}",
                          [{"op": "replace", "path": "/node_uuid", "value": nodes["ten-a1"]}])
    assert back.status_code == 200 and _port_node(cloud, port) == nodes["ten-a1"], back.text
    callers["sys"]("PATCH", f"/v1/nodes/{nodes['ten-b']}",
                   [{"op": "remove", "path": "/lessee"}])


def test_a_project_admin_cannot_create_a_port_on_another_projects_node(cloud, tenants):
    callers, nodes, _ = tenants
    body = {"node_uuid": nodes["ten-b"], "address": "52:54:00:0b:00:02"}
    refused = callers["a-admin"]("POST", "/v1/ports", body)
    assert refused.status_code in (403, 404), refused.text
    member = callers["a-member"]("POST", "/v1/ports", {**body, "node_uuid": nodes["ten-a1"]})
    assert member.status_code == 403 and "baremetal:port:create" in member.text
    listed = callers["sys"]("GET", "/v1/ports?address=52:54:00:0b:00:02").json()["ports"]
    assert listed == []
    # Listing the ports of another project's node is answered as for a node that does not
    # exist: its existence is not revealed either.
    hidden = callers["a-admin"]("GET", f"/v1/ports?node={nodes['ten-b']}")
    assert hidden.status_code == 404, hidden.text
    assert callers["a-admin"]("GET", f"/v1/ports?node_uuid={nodes['ten-a1']}").json()[
        "ports"][0]["address"] == "52:54:00:0b:00:01"


def test_owner_and_lessee_patches_follow_ironic_rules(cloud, tenants):
    callers, nodes, _ = tenants
    path = f"/v1/nodes/{nodes['ten-a2']}"
    give = [{"op": "add", "path": "/owner", "value": cloud.projects["tenant-b"]}]
    refused = callers["a-admin"]("PATCH", path, give)
    assert refused.status_code == 403 and "baremetal:node:update:owner" in refused.text
    lease = [{"op": "add", "path": "/lessee", "value": cloud.projects["tenant-b"]}]
    assert callers["a-member"]("PATCH", path, lease).status_code == 200
    # The lessee sees the node but may not change who leases it.
    unlease = [{"op": "remove", "path": "/lessee"}]
    refused = callers["b-member"]("PATCH", path, unlease)
    assert refused.status_code == 403 and "baremetal:node:update:lessee" in refused.text
    shown = callers["sys"]("GET", path).json()
    assert (shown["owner"], shown["lessee"]) == (cloud.projects["tenant-a"],
                                                  cloud.projects["tenant-b"])
    assert callers["a-member"]("PATCH", path, unlease).status_code == 200


def test_only_the_owner_reads_the_stored_inventory(cloud, tenants):
    callers, nodes, _ = tenants
    path = f"/v1/nodes/{nodes['ten-a1']}/inventory"
    owner = callers["a-member"]("GET", path)
    assert owner.status_code == 200 and owner.json()["inventory"] == {"cpu": {"count": 2}}
    stranger = callers["b-member"]("GET", path)
    assert stranger.status_code == 404 and "cpu" not in stranger.text
    callers["sys"]("PATCH", f"/v1/nodes/{nodes['ten-a1']}",
                   [{"op": "add", "path": "/lessee", "value": cloud.projects["tenant-b"]}])
    lessee = callers["b-member"]("GET", path)
    assert lessee.status_code == 403 and "baremetal:node:inventory:get" in lessee.text
    callers["sys"]("PATCH", f"/v1/nodes/{nodes['ten-a1']}",
                   [{"op": "remove", "path": "/lessee"}])


def test_a_parent_node_in_another_project_is_refused_as_unknown(cloud, tenants):
    # A project admin creates nodes of its own project; their parent must be visible to it.
    callers, nodes, _ = tenants
    for parent in (nodes["ten-b"], "no-such-node"):
        refused = callers["a-admin"]("POST", "/v1/nodes", {
            "driver": "fake-hardware", "parent_node": parent}, version="1.83")
        assert refused.status_code == 400, refused.text
        assert "Requested value was invalid" in refused.text
    child = callers["a-admin"]("POST", "/v1/nodes", {
        "driver": "fake-hardware", "parent_node": nodes["ten-a1"]}, version="1.83")
    assert child.status_code == 201 and child.json()["parent_node"] == nodes["ten-a1"], \
        child.text
    assert callers["a-admin"]("DELETE", f"/v1/nodes/{child.json()['uuid']}").status_code == 204


def _token(cloud: Cloud, name: str) -> str:
    """A token for ``name``'s user of CLOUDS, asked of Keystone as a client does."""
    user, project = CLOUDS[name]
    scope = {"system": {"all": True}} if project is None else \
        {"project": {"name": project, "domain": {"id": "default"}}}
    password = cloud.keystone.admin_password if user == "admin" else PASSWORD
    resp = requests.post(cloud.keystone.auth_url + "/auth/tokens", timeout=30, json={
        "auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"id": "default"}, "password": password}}},
            "scope": scope}})
    assert resp.status_code == 201, resp.text
    return resp.headers["X-Subject-Token"]


def test_no_role_copies_moves_or_probes_a_masked_secret_with_a_patch(cloud):
    secret = "Ipmi-Owner-Pa55"
    tokens = {name: _token(cloud, name) for name in ("sysadmin", "a-admin", "b-member")}

    def patch(name: str, uuid: str, *operations: dict) -> requests.Response:
        return requests.patch(f"{cloud.api.url}/v1/nodes/{uuid}", json=list(operations),
                              headers={"X-Auth-Token": tokens[name], **API_HEADERS},
                              timeout=30)

    made = requests.post(f"{cloud.api.url}/v1/nodes", timeout=30,
                         headers={"X-Auth-Token": tokens["sysadmin"], **API_HEADERS},
                         json={"driver": "ipmi", "name": "ks-secret-node",
                               "driver_info": {"ipmi_address": "192.0.2.7",
                                               "ipmi_password": secret}})
    assert made.status_code == 201, made.text
    uuid = made.json()["uuid"]
    engine = create_engine(cloud.db)
    with engine.begin() as connection:  # owned by tenant-a, leased to tenant-b
        connection.execute(sa.text("UPDATE nodes SET owner = :owner, lessee = :lessee "
                                   "WHERE uuid = :uuid"),
                           {"owner": cloud.projects["tenant-a"],
                            "lessee": cloud.projects["tenant-b"], "uuid": uuid})
    leak = {"op": "copy", "from": "/driver_info/ipmi_password", "path": "/extra/leak"}
    erase = {"op": "move", "from": "/driver_info/ipmi_password", "path": "/extra/leak"}
    probe = {"op": "test", "path": "/driver_info/ipmi_password", "value": secret}
    for name in ("sysadmin", "a-admin"):  # may write driver_info, may not read its secrets
        for operation in (leak, erase, probe):
            resp = patch(name, uuid, operation)
            assert resp.status_code == 400, (name, operation, resp.text)
            assert secret not in resp.text
    # The lessee's member may change extra but may not see driver_info at all.
    for operation in (leak, erase, probe, {"op": "copy", "from": "/driver_info/ipmi_address",
                                           "path": "/extra/bmc"}):
        resp = patch("b-member", uuid, operation)
        assert resp.status_code == 403, (operation, resp.text)
        assert "baremetal:node:" in resp.text and secret not in resp.text
    assert patch("b-member", uuid, {"op": "add", "path": "/extra/mine",
                                    "value": 1}).status_code == 200
    owner = patch("a-admin", uuid, {"op": "copy", "from": "/driver_info/ipmi_address",
                                    "path": "/extra/bmc"})
    assert owner.status_code == 200, owner.text
    with engine.connect() as connection:
        info, extra = connection.execute(sa.text("SELECT driver_info, extra FROM nodes "
                                                 "WHERE uuid = :uuid"), {"uuid": uuid}).one()
    engine.dispose()
    assert json.loads(info)["ipmi_password"] == secret
    assert json.loads(extra) == {"mine": 1, "bmc": "192.0.2.7"}
