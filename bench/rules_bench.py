"""Benchmark: 100 rules x 1,000 inventories, our rules engine beside Ironic 39's.

Both engines get the same generated rules (restricted to what both support: dict arguments,
string comparisons, no phases/scopes/loops) and the same inventories. Ironic's engine runs in a
subprocess of its own virtualenv; we time only rule evaluation and actions for both (not
Ironic's per-inspection database query or built-in YAML re-read, which would only slow it).

    .venv/bin/python bench/rules_bench.py [--baseline-python .venvs/ironic39/bin/python]
"""

import argparse
import copy
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "inventories", "dell_r640.json")
VENDORS = ["Dell Inc.", "HPE", "Lenovo", "Supermicro", "QEMU"]


def make_inventories(count: int, seed: int) -> list[dict]:
    """Variations of a real IPA inventory."""
    rng = random.Random(seed)
    with open(FIXTURE) as stream:
        base = json.load(stream)["inventory"]
    out = []
    for i in range(count):
        inv = copy.deepcopy(base)
        inv["system_vendor"]["manufacturer"] = rng.choice(VENDORS)
        inv["system_vendor"]["serial_number"] = f"SN{i:06d}"
        inv["memory"]["physical_mb"] = rng.choice([8192, 65536, 131072, 393216])
        inv["cpu"]["count"] = rng.choice([4, 16, 48, 80])
        inv["bmc_address"] = f"10.{rng.randrange(4)}.{rng.randrange(256)}.{rng.randrange(256)}"
        for n, iface in enumerate(inv["interfaces"]):
            iface["mac_address"] = f"52:54:{i >> 8 & 255:02x}:{i & 255:02x}:00:{n:02x}"
        out.append(inv)
    return out


def make_rules(count: int, seed: int) -> list[dict]:
    """Rules with 1-3 conditions and 1-2 actions, in the syntax both engines accept."""
    rng = random.Random(seed)
    conditions = [
        lambda: {"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}",
                                            "regex": rng.choice(["(?i)dell", "HP", "Lenovo"])}},
        lambda: {"op": "matches", "args": {"value": "{inventory[system_vendor][serial_number]}",
                                           "regex": f"SN0{rng.randrange(10)}.*"}},
        lambda: {"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}", "x86_64"]}},
        lambda: {"op": "!eq", "args": {"values": ["{inventory[memory][physical_mb]}",
                                                  str(rng.choice([8192, 65536]))],
                                       "force_strings": True}},
        lambda: {"op": "in-net", "args": {"address": "{inventory[bmc_address]}",
                                          "subnet": f"10.{rng.randrange(4)}.0.0/16"}},
        lambda: {"op": "!is-empty", "args": {"value": "{inventory[bmc_address]}"}},
        lambda: {"op": "one-of", "args": {"value": "{inventory[boot][current_boot_mode]}",
                                          "values": ["uefi", "bios"]}},
    ]
    actions = [
        lambda i: {"op": "set-attribute", "args": {"path": f"/extra/rule{i}",
                                                   "value": "{inventory[bmc_address]}"}},
        lambda i: {"op": "set-plugin-data", "args": {"path": f"rules.r{i}",
                                                     "value": "{inventory[cpu][count]}"}},
        lambda i: {"op": "log", "args": {"msg": "rule {inventory[system_vendor][serial_number]}",
                                         "level": "debug"}},
    ]
    rules = []
    for i in range(count):
        rules.append({
            "uuid": f"00000000-0000-4000-8000-{i:012d}",
            "priority": rng.randrange(100), "sensitive": False, "phase": "main",
            "description": f"bench rule {i}",
            "conditions": [rng.choice(conditions)() for _ in range(rng.randint(1, 3))],
            "actions": [rng.choice(actions)(i) for _ in range(rng.randint(1, 2))],
        })
    return rules


def run_ours(rules_docs: list[dict], inventories: list[dict]) -> tuple[float, int]:
    """Seconds for our engine, and how many rules ran in total."""
    sys.path.insert(0, os.path.join(HERE, ".."))
    # imported here: the baseline worker runs this file in Ironic's venv without our package
    from inspection.rules import InMemoryNode, RulesEngine, validate_rule  # noqa: PLC0415
    rules = [validate_rule(copy.deepcopy(d)) for d in rules_docs]
    engine = RulesEngine("always")
    matched = 0
    start = time.perf_counter()
    for inv in inventories:
        node = InMemoryNode({"uuid": "11111111-2222-4333-8444-555555555555"})
        matched += len(engine.apply(rules, "main", inv, {}, node))
    return time.perf_counter() - start, matched


def baseline_worker(path: str) -> None:
    """Runs inside Ironic's virtualenv: time Ironic 39's engine on the same data."""
    logging.disable(logging.WARNING)
    from ironic.common.inspection_rules import engine  # noqa: PLC0415 (only in Ironic's venv)
    with open(path) as stream:
        data = json.load(stream)
    rules = sorted(data["rules"], key=lambda r: r.get("priority", 0), reverse=True)

    class FakeNode(types.SimpleNamespace):
        def save(self):
            pass

    matched = 0
    start = time.perf_counter()
    for inv in data["inventories"]:
        node = FakeNode(uuid="11111111-2222-4333-8444-555555555555", extra={},
                        properties={}, driver_info={})
        task = types.SimpleNamespace(node=node, ports=[], context=None)
        plugin_data = {}
        for rule in rules:
            result = engine._check_rule(task, rule, inv, plugin_data)
            if result is None:
                continue
            engine.apply_actions(task, rule, *result)
            matched += 1
    print(json.dumps({"seconds": time.perf_counter() - start, "matched": matched}))


def main() -> None:
    """Generate the data, run both engines, print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=100)
    parser.add_argument("--inventories", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=3, help="median of N runs")
    parser.add_argument("--baseline-python", default=".venvs/ironic39/bin/python")
    parser.add_argument("--baseline-worker", help=argparse.SUPPRESS)
    parser.add_argument("--output", help="also write the figures to this JSON file")
    args = parser.parse_args()
    if args.baseline_worker:
        baseline_worker(args.baseline_worker)
        return
    rules = make_rules(args.rules, args.seed)
    inventories = make_inventories(args.inventories, args.seed)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
        json.dump({"rules": rules, "inventories": inventories}, tmp)
    try:
        ours, theirs = [], []
        for _ in range(args.repeat):  # alternating, so both sides see the same load
            ours.append(run_ours(rules, inventories))
            out = subprocess.run([args.baseline_python, os.path.abspath(__file__),
                                  "--baseline-worker", tmp.name],
                                 capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            theirs.append((result["seconds"], result["matched"]))
    finally:
        os.unlink(tmp.name)
    our_times, their_times = [t for t, _ in ours], [t for t, _ in theirs]
    our_med, their_med = statistics.median(our_times), statistics.median(their_times)
    print(f"{args.rules} rules x {args.inventories} inventories, median of {args.repeat} "
          f"(min-max), load average {os.getloadavg()[0]:.1f}")
    print(f"ours:      {our_med:8.3f} s  ({min(our_times):.3f}-{max(our_times):.3f})  "
          f"({ours[0][1]} rule applications)")
    print(f"Ironic 39: {their_med:8.3f} s  ({min(their_times):.3f}-{max(their_times):.3f})  "
          f"({theirs[0][1]} rule applications)")
    print(f"speed-up: {their_med / our_med:.2f}x")
    if args.output:
        with open(args.output, "w") as stream:
            json.dump({"ours_s": our_times, "ironic_s": their_times,
                       "applications": [ours[0][1], theirs[0][1]],
                       "speedup": their_med / our_med}, stream, indent=1)

if __name__ == "__main__":
    main()
