"""Ironic 39's own processing of one inspection callback, timed (runs in the baseline venv).

What is timed is what Ironic does when IPA posts its data, minus HTTP and RPC:

* ``api``: the API's part, ``inspect_utils.lookup_node(context, macs, bmc_addresses)`` (MACs and
  BMC addresses extracted as the API does);
* ``conductor``: the conductor's part, as ``ConductorManager.continue_inspection`` runs it but
  inline instead of in a worker thread: ``task_manager.acquire(ctx, uuid, shared=False)``
  (reservation, node and ports loaded, driver built), ``task.process_event('resume')``, then
  ``ironic.conductor.inspection.continue_inspection(task, inventory, plugin_data)``: the agent
  inspect interface's hooks (``[inspector]hooks``, the defaults), power off through the
  ``fake`` power interface, the ``main`` inspection rules stored in the database, inventory
  stored, firmware caching attempted, node to ``manageable``; then the reservation released.

The node uses the ``fake-hardware`` type (``fake`` power and management, ``no-firmware``,
unmanaged inspection), so no BMC is contacted. Between runs the node is put back in
``inspect wait`` (powered on, ``extra``/``properties``/traits emptied, BMC cache restored).

    .venvs/ironic39/bin/python bench/ironic_processing_baseline.py --inventory F.json
        --rules rules.json [--db ironic.sqlite] [--workdir DIR] [--runs 20]

Prints one JSON object on the last line of stdout. ``--db`` reuses a database made by
``ironic-dbsync create_schema`` (e.g. with thousands of waiting nodes); without it a new one is
made in ``--workdir``. Not a test: nothing asserts a timing.
"""

import argparse
import json
import logging
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

CONFIG = """[DEFAULT]
enabled_hardware_types = fake-hardware
enabled_inspect_interfaces = agent,no-inspect,fake
enabled_power_interfaces = fake
enabled_management_interfaces = fake
enabled_boot_interfaces = fake
enabled_deploy_interfaces = fake
enabled_bios_interfaces = no-bios
enabled_console_interfaces = no-console
enabled_firmware_interfaces = no-firmware
enabled_network_interfaces = noop
enabled_raid_interfaces = no-raid
enabled_rescue_interfaces = no-rescue
enabled_storage_interfaces = noop
enabled_vendor_interfaces = no-vendor
host = bench-conductor
[database]
connection = sqlite:///{db}
"""
WRITES = {"INSERT", "UPDATE", "DELETE"}
NODE_UUID = "5b8b0d6e-6c0b-4f4e-9a52-000000000001"


def configure(workdir: str, db: str | None, journal: str) -> str:
    """Write ironic.conf, create the schema if the database is new, load the config.

    ``journal`` is the SQLite journal mode written into the database file (it persists):
    Ironic 39 means to switch SQLite to WAL itself, but here its listener has no effect and
    the file stays in rollback-journal mode (``delete``), one fsync'd journal per commit.
    """
    if db is None:
        db = os.path.join(workdir, "ironic-processing.sqlite")
        if os.path.exists(db):
            os.unlink(db)
    conf_file = os.path.join(workdir, "ironic-processing.conf")
    with open(conf_file, "w") as stream:
        stream.write(CONFIG.format(db=db))
    if not os.path.exists(db):
        dbsync = os.path.join(os.path.dirname(sys.executable), "ironic-dbsync")
        subprocess.run([dbsync, "--config-file", conf_file, "create_schema"], check=True,
                       capture_output=True)
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA journal_mode={journal}")
    from ironic.conf import CONF  # noqa: PLC0415 - baseline venv only
    from ironic.objects import register_all  # noqa: PLC0415

    register_all()
    CONF(["--config-file", conf_file], project="ironic")
    return db


def create_node(ctx, inventory: dict):
    """A fake-hardware node in inspect wait with the inventory's PXE port and BMC cached."""
    from ironic.common import driver_factory  # noqa: PLC0415
    from ironic.objects import node as node_obj  # noqa: PLC0415
    from ironic.objects import port as port_obj  # noqa: PLC0415

    node = node_obj.Node(ctx, uuid=NODE_UUID, driver="fake-hardware",
                         inspect_interface="agent", name="bench-processing",
                         provision_state="inspect wait", target_provision_state="manageable",
                         power_state="power on", driver_info={}, properties={}, extra={},
                         driver_internal_info={})
    driver_factory.check_and_update_node_interfaces(node)
    node.create()
    port_obj.Port(ctx, node_id=node.id, address=inventory["interfaces"][0]["mac_address"],
                  pxe_enabled=True).create()
    return node


def store_rules(ctx, rules: list[dict]) -> None:
    """Validate and store the rules as the API's POST does."""
    from ironic.common.inspection_rules import validation  # noqa: PLC0415
    from ironic.objects import inspection_rule  # noqa: PLC0415
    from oslo_utils import uuidutils  # noqa: PLC0415

    for rule in rules:
        rule = {"uuid": uuidutils.generate_uuid(), "sensitive": False, **rule}
        validation.validate_rule(rule)
        inspection_rule.InspectionRule(ctx, **rule).create()


def reset(ctx, node_id: int, bmc: str) -> None:
    """Put the node back in inspect wait as inspection start leaves it."""
    from ironic.db import api as dbapi  # noqa: PLC0415

    db = dbapi.get_instance()
    db.unset_node_traits(node_id)
    db.update_node(node_id, {"provision_state": "inspect wait",
                             "target_provision_state": "manageable",
                             "power_state": "power on", "extra": {}, "properties": {},
                             "last_error": None, "reservation": None,
                             "driver_internal_info": {"lookup_bmc_addresses": [bmc]}})


def one_callback(ctx, body: dict) -> tuple[float, float]:
    """One callback: the API's lookup, then the conductor's processing (ms each)."""
    from ironic.api.controllers.v1 import ramdisk  # noqa: PLC0415
    from ironic.conductor import inspection, task_manager  # noqa: PLC0415
    from ironic.drivers.modules import inspect_utils  # noqa: PLC0415

    start = time.perf_counter()
    data = json.loads(json.dumps(body))  # the API gets a fresh decoded body
    inventory = data.pop("inventory")
    macs = ramdisk.get_valid_mac_addresses(i["mac_address"] for i in inventory["interfaces"])
    bmcs = list(filter(None, (inventory.get("bmc_address"), inventory.get("bmc_v6address"))))
    node = inspect_utils.lookup_node(ctx, macs, bmcs)
    middle = time.perf_counter()
    with task_manager.acquire(ctx, node.uuid, purpose="continue inspection",
                              shared=False) as task:
        task.process_event("resume")
        inspection.continue_inspection(task, inventory, data)
    end = time.perf_counter()
    return (middle - start) * 1000, (end - middle) * 1000


def check(ctx, rules: int) -> dict:
    """What the last run left: state, error, how much the rules did (to compare sides)."""
    from ironic.objects import node as node_obj  # noqa: PLC0415
    from ironic.objects import trait as trait_obj  # noqa: PLC0415

    node = node_obj.Node.get_by_uuid(ctx, NODE_UUID)
    traits = trait_obj.TraitList.get_by_node_id(ctx, node.id)
    caps = node.properties.get("capabilities", "")
    return {"provision_state": node.provision_state, "last_error": node.last_error,
            "power_state": node.power_state, "cpu_arch": node.properties.get("cpu_arch"),
            "extra_keys": len(node.extra), "traits": len(traits),
            "capabilities": len([c for c in caps.split(",") if c]), "rules": rules}


def count_statements(func) -> dict:
    """SQL statements and write statements (INSERT/UPDATE/DELETE) run by ``func()``."""
    import sqlalchemy as sa  # noqa: PLC0415 - baseline venv only

    counts = {"statements": 0, "writes": 0}

    def on_execute(_conn, _cursor, statement, *_args):
        counts["statements"] += 1
        counts["writes"] += statement.lstrip().split(None, 1)[0].upper() in WRITES

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", on_execute)
    try:
        func()
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", on_execute)
    return counts


def main() -> None:
    """Set up the database, store the rules, time first and warm callbacks, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", required=True, help="IPA callback body (JSON)")
    parser.add_argument("--rules", required=True, help="JSON list of rules (main phase)")
    parser.add_argument("--db", help="existing Ironic SQLite database to add the node to")
    parser.add_argument("--workdir")
    parser.add_argument("--runs", type=int, default=20, help="warm runs")
    parser.add_argument("--journal", choices=["wal", "delete"], default="wal",
                        help="SQLite journal mode of Ironic's database (ours uses WAL)")
    args = parser.parse_args()
    with open(args.inventory) as stream:
        body = json.load(stream)
    with open(args.rules) as stream:
        rules = json.load(stream)
    with tempfile.TemporaryDirectory(prefix="ironic-processing-") as tmp:
        configure(args.workdir or tmp, args.db, args.journal)
        logging.disable(logging.CRITICAL)
        from ironic.common import context  # noqa: PLC0415

        ctx = context.get_admin_context()
        node = create_node(ctx, body["inventory"])
        store_rules(ctx, rules)
        bmc = body["inventory"]["bmc_address"]
        reset(ctx, node.id, bmc)
        first = one_callback(ctx, body)  # loads the driver, hooks and rule plugins
        result = check(ctx, len(rules))
        reset(ctx, node.id, bmc)
        statements = count_statements(lambda: one_callback(ctx, body))
        lookups, processing, totals = [], [], []
        for _ in range(args.runs):
            reset(ctx, node.id, bmc)
            lookup_ms, process_ms = one_callback(ctx, body)
            lookups.append(lookup_ms)
            processing.append(process_ms)
            totals.append(lookup_ms + process_ms)
        last = check(ctx, len(rules))
        if last["provision_state"] != "manageable" or last != result:
            sys.exit(f"Ironic processing did not finish as expected: {result} then {last}")
    print(json.dumps({
        "processing_first": {"median_ms": round(first[1], 3), "runs": 1},
        "processing_warm": {"median_ms": round(statistics.median(processing), 3),
                            "runs": len(processing)},
        "lookup_warm": {"median_ms": round(statistics.median(lookups), 3),
                        "runs": len(lookups)},
        "callback_first": {"median_ms": round(sum(first), 3), "runs": 1},
        "callback_warm": {"median_ms": round(statistics.median(totals), 3),
                          "runs": len(totals)},
        "journal_mode": args.journal, "sql_per_callback": statements, "outcome": last}))


if __name__ == "__main__":
    main()
