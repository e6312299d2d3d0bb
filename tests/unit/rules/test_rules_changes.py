"""What changed between two views of a node: paths, old and new values, secrets masked."""

from inspection.rules import changes
from inspection.rules.adapters import InMemoryNode


def test_changes_are_leaves_in_path_order_with_secrets_masked():
    node = InMemoryNode({"uuid": "n1", "properties": {"cpus": 4}},
                        ports=[{"address": "aa:bb:cc:dd:ee:ff", "physical_network": None}])
    before = changes.view(node, {"a/b": 1})
    node.set("/properties/cpus", 8)
    node.set("/driver_info/bmc_password", "hunter2")
    node.set("/driver_info/redfish_address", "https://u:pw@bmc/")
    node.port_set("aa:bb:cc:dd:ee:ff", "/physical_network", "fab1")
    node.add_trait("CUSTOM_X")
    after = changes.view(node, {"a/b": 2})
    assert changes.diff(before, after) == [
        {"path": "/driver_info/bmc_password", "old": None, "new": "***"},
        {"path": "/driver_info/redfish_address", "old": None, "new": "https://u:***@bmc/"},
        {"path": "/plugin_data/a~1b", "old": 1, "new": 2},
        {"path": "/ports/aa:bb:cc:dd:ee:ff/physical_network", "old": None, "new": "fab1"},
        {"path": "/properties/cpus", "old": 4, "new": 8},
        {"path": "/traits", "old": [], "new": ["CUSTOM_X"]}]
    hidden = changes.diff(before, after, hide_values=True)
    assert [c["path"] for c in hidden] == [c["path"] for c in changes.diff(before, after)]
    assert all(c["new"] == "***" and c["old"] in (None, "***") for c in hidden)
    assert changes.diff(before, before) == []
