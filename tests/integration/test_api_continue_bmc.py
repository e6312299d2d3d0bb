"""The ramdisk callback finds a node by its BMC address when no interface has a usable MAC
(an InfiniBand-only machine), as Ironic does."""

import copy

import pytest

from tests.integration.api_helpers import Api, api_conf, error_message
from tests.integration.pipeline_support import body

BMC = "192.0.2.201"


@pytest.fixture
def api(tmp_path, db_url):
    api = Api(api_conf(tmp_path, db_url))
    yield api
    api.close()


def _infiniband_only(bmc_address: str | None) -> dict:
    data = copy.deepcopy(body("bios-vm-x86_64"))
    # IPOIB hardware addresses are 20 bytes: no MAC the lookup or the filters can use.
    data["inventory"]["interfaces"] = [{
        "name": "ib0", "mac_address": "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:a1",
        "ipv4_address": "10.0.0.9"}]
    if bmc_address is None:
        data["inventory"].pop("bmc_address", None)
        data["inventory"].pop("bmc_v6address", None)
    else:
        data["inventory"]["bmc_address"] = bmc_address
    return data


def test_bmc_address_alone_finds_the_waiting_node(api):
    # fake-hardware: the BMC address only serves lookup, no BMC is driven.
    created = api.client.post("/v1/nodes", json={
        "driver": "fake-hardware", "name": "ib-node", "driver_info": {"ipmi_address": BMC}})
    assert created.status_code == 201, created.json
    for target in ("manage", "inspect"):
        assert api.client.put("/v1/nodes/ib-node/states/provision",
                              json={"target": target}).status_code == 202

    resp = api.unversioned.post("/v1/continue_inspection", json=_infiniband_only(BMC))
    assert resp.status_code == 202, resp.json
    assert resp.json == {"uuid": created.json["uuid"]}
    api.wait_processed()
    # As in Ironic: found, then refused by validate-interfaces (nothing to PXE boot from).
    node = api.client.get("/v1/nodes/ib-node").json
    assert node["provision_state"] == "inspect failed"
    assert "interface" in node["last_error"]

    unknown = api.unversioned.post("/v1/continue_inspection", json=_infiniband_only("192.0.2.99"))
    assert unknown.status_code == 404
    nothing = api.unversioned.post("/v1/continue_inspection", json=_infiniband_only(None))
    assert nothing.status_code == 400
    assert "no BMC address" in error_message(nothing)
