"""A 1,000-machine burst, as when a rack is powered on at once: ours beside Ironic 39.

Per side, on a fresh PostgreSQL database, ``--nodes`` nodes wait in ``inspect wait`` (agent
inspect interface, fake hardware: nothing powers anything), 2 ports each; then every machine
posts its ramdisk callback (``POST /v1/continue_inspection``, the ``uefi-dell-r640`` inventory
with the machine's own MACs and BMC address) from its own loopback address (127.100.x.y), through
``--senders`` concurrent senders all started at once. Timed: from the first callback sent until
every node is ``manageable`` (the database polled directly), the answers (status, time), and the
machine's 1-minute load.

- Ours: ``ironic-inspection dbsync``, the nodes and ports inserted in bulk, then
  ``ironic-inspection-api`` and two ``ironic-inspection-worker`` on a RabbitMQ vhost of the
  run's own, all at their default options (the per-address callback limit included).
- Ironic 39 (``.venvs/ironic39``): ``ironic-dbsync create_schema``, then ``ironic`` (API and
  conductor in one process, fake hardware, ``rpc_transport = none``: tests/support/ironic.py).
  Node 0 is enrolled through Ironic's API (create, 2 ports, manage, inspect) and reaches
  ``inspect wait`` by Ironic's own code; the other nodes are copies of its rows (node and
  ports) with their own UUID, name, BMC address and MACs, inserted in bulk.

Not a test: nothing asserts a timing.

    .venv/bin/python bench/burst_bench.py [--nodes 1000] [--runs 3] [--senders 64]
        [--output bench/results/burst.json] [--workdir DIR --keep]
"""

import argparse
import copy
import datetime
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402 - after the path set-up

from inspection.db.models import Node, Port  # noqa: E402
from pxe_filter.common.database import create_engine  # noqa: E402
from tests.support import services  # noqa: E402
from tests.support.ironic import Ironic  # noqa: E402
from tests.support.processes import console_script, write_config  # noqa: E402
from tests.support.services_procs import start_api, start_worker  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "inventories" / "uefi-dell-r640.json"
PATH = "/v1/continue_inspection"
#: Polling period of the database (s): 1,000 rows grouped by state is a cheap query.
POLL = 0.25
REQUEST_RE = re.compile(r"\[[^\]]*\] ")
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


# --- the machines (both sides) ---

def mac(index: int) -> str:
    """Lower-case colon MAC number ``index`` (2 per machine, then 3 more NICs each)."""
    raw = 0x5254BB000000 + index
    return ":".join(f"{(raw >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def bmc(node: int) -> str:
    """The BMC address of machine ``node``."""
    return f"10.{20 + node // 250}.0.{node % 250 + 1}"


def node_uuid(node: int) -> str:
    """The UUID of machine ``node``."""
    return str(uuid.UUID(int=0xB0257 << 64 | node, version=4))


def client_address(node: int) -> str:
    """The loopback address machine ``node`` posts from (all of 127/8 is local on Linux)."""
    return f"127.100.{node // 250}.{node % 250 + 1}"


def callback_body(template: dict, node: int, nodes: int) -> bytes:
    """The IPA-shaped callback of machine ``node``: the fixture with its MACs and BMC."""
    body = copy.deepcopy(template)
    inventory = body["inventory"]
    for number, iface in enumerate(inventory["interfaces"]):
        # The first two NICs are the node's enrolled ports; the others unique, not enrolled.
        iface["mac_address"] = mac(2 * node + number if number < 2
                                   else 2 * nodes + 3 * node + number - 2)
    pxe = inventory["interfaces"][0]["mac_address"]
    inventory["boot"]["pxe_interface"] = pxe
    body["boot_interface"] = pxe
    inventory["bmc_address"] = bmc(node)
    return json.dumps(body).encode()


def our_rows(nodes: int, started: datetime.datetime):
    """Our nodes in ``inspect wait`` as an unmanaged agent inspection leaves them."""
    for i in range(nodes):
        yield {"id": i + 1, "uuid": node_uuid(i), "name": f"burst-{i}",
               "driver": "fake-hardware", "driver_info": {"ipmi_address": bmc(i)},
               "driver_internal_info": {"lookup_bmc_addresses": [bmc(i)]},
               "properties": {}, "extra": {}, "instance_info": {},
               "provision_state": "inspect wait", "target_provision_state": "manageable",
               "inspect_interface": "agent", "power_state": "power on",
               "conductor_group": "", "inspection_started_at": started}


def our_ports(nodes: int):
    """Two ports per node, the first PXE-enabled."""
    for i in range(nodes * 2):
        yield {"id": i + 1, "uuid": str(uuid.UUID(int=0xB0258 << 64 | i, version=4)),
               "address": mac(i), "node_id": i // 2 + 1, "pxe_enabled": i % 2 == 0,
               "extra": {}, "local_link_connection": {}, "internal_info": {}}


# --- measuring ---

class Sampler:
    """Polls the node states (database) and the 1-minute load (/proc/loadavg) in a thread."""

    def __init__(self, engine: sa.Engine, start: float) -> None:
        self.engine, self.start = engine, start
        self.curve: list[tuple[float, int, int]] = []  # (t, manageable, inspect failed)
        self.load: list[tuple[float, float]] = []
        self.counts: Counter = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        query = sa.text("SELECT provision_state, count(*) FROM nodes GROUP BY 1")
        last_load = -1.0
        time.sleep(max(0.0, self.start - time.monotonic()))  # the curve starts at 0
        while not self._stop.is_set():
            now = time.monotonic() - self.start
            with self.engine.connect() as conn:
                counts = Counter(dict(conn.execute(query).all()))
            point = (round(now, 3), counts["manageable"], counts["inspect failed"])
            if not self.curve or self.curve[-1][1:] != point[1:]:
                self.curve.append(point)
            self.counts = counts
            if now - last_load >= 1:
                self.load.append((round(now, 1), read_load()))
                last_load = now
            self._stop.wait(POLL)

    def stop(self) -> None:
        """Stop polling (one last sample is taken first)."""
        self._stop.set()
        self._thread.join()


def read_load() -> float:
    """The machine's 1-minute load average."""
    with open("/proc/loadavg") as stream:
        return float(stream.read().split()[0])


def post_all(url: str, bodies: list[bytes], senders: int, start_at: float) -> list[tuple]:
    """POST every body from its machine's address through ``senders`` threads that all
    start at ``start_at`` (monotonic); per machine (sent, answered, status) in seconds from
    ``start_at``."""
    host, port = url.removeprefix("http://").split(":")
    results: list[tuple] = [()] * len(bodies)
    lock = threading.Lock()
    todo = iter(range(len(bodies)))
    barrier = threading.Barrier(senders)

    def sender() -> None:
        barrier.wait()
        time.sleep(max(0.0, start_at - time.monotonic()))
        while True:
            with lock:
                index = next(todo, None)
            if index is None:
                return
            sent = time.monotonic()
            conn = http.client.HTTPConnection(host, int(port), timeout=300,
                                              source_address=(client_address(index), 0))
            try:
                conn.request("POST", PATH, body=bodies[index],
                             headers={"Content-Type": "application/json"})
                answer = conn.getresponse()
                answer.read()
                status: int | str = answer.status
            except OSError as exc:  # refused, reset, timed out: the machine got no answer
                status = type(exc).__name__
            finally:
                conn.close()
            results[index] = (sent - start_at, time.monotonic() - start_at, status)

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def burst(url: str, engine: sa.Engine, bodies: list[bytes], args, pids: list[int]) -> dict:
    """Send the burst and follow the nodes until all are done, stalled or ``--bound``;
    ``pids``: the side's processes (their children count too) whose CPU time is taken."""
    nodes = len(bodies)
    start = time.monotonic() + 0.5  # every sender thread is up by then
    load_before = read_load()
    tcp_before = tcp_counters()
    cpu_before = cpu_seconds(pids)
    sampler = Sampler(engine, start)
    answers = post_all(url, bodies, args.senders, start)
    last_answer = max(answer[1] for answer in answers)
    accepted = [answer for answer in answers if answer[2] == 202]
    changed, seen = time.monotonic(), None
    while True:
        counts = sampler.counts
        done = counts["manageable"] + counts["inspect failed"]
        if done >= nodes:
            break
        if (counts["manageable"], counts["inspect failed"]) != seen:
            seen, changed = (counts["manageable"], counts["inspect failed"]), time.monotonic()
        # Nothing moved for --stall s once every answer is in: the rest is lost.
        if time.monotonic() - changed > args.stall or time.monotonic() - start > args.bound:
            break
        time.sleep(POLL)
    time.sleep(POLL * 2)  # one more sample after the last change
    sampler.stop()
    counts = sampler.counts
    tcp_after = tcp_counters()
    cpu = {name: round(cpu_seconds(pids)[name] - cpu_before.get(name, 0.0), 2)
           for name in cpu_seconds(pids)}
    all_done = next((t for t, managed, _ in sampler.curve if managed >= nodes), None)
    times = sorted(answer[1] - answer[0] for answer in answers)
    loads = [load for _, load in sampler.load]
    return {
        "nodes": nodes, "senders": args.senders,
        "all_manageable_s": all_done,
        "last_answer_s": round(last_answer, 3),
        "accepted": len(accepted),
        "accepted_per_s": round(len(accepted) / max(a[1] for a in accepted), 1)
        if accepted else 0.0,
        "answer_ms": percentiles(times),
        "statuses": dict(Counter(str(answer[2]) for answer in answers)),
        "manageable": counts["manageable"], "inspect_failed": counts["inspect failed"],
        "lost": nodes - counts["manageable"],
        "states_at_end": dict(counts),
        "load_1min": {"before": load_before, "median": statistics.median(loads),
                      "max": max(loads)},
        # CPU time the side's processes used from the burst's start to the end of the wait:
        # on a shared machine, what the work cost regardless of how long it waited for a CPU.
        "cpu_s": cpu, "cpu_s_total": round(sum(cpu.values()), 2),
        # Machine-wide: a full accept queue drops connections (other jobs count too).
        "tcp": {name: tcp_after[name] - tcp_before[name] for name in tcp_after},
        "curve": sampler.curve, "load_samples": sampler.load,
        "answer_times_ms": [round(t * 1000, 1) for t in times],
        "answers": [(round(sent, 3), round(answered, 3), status)
                    for sent, answered, status in answers],
    }


def cpu_seconds(pids: list[int]) -> dict[str, float]:
    """User + system CPU seconds of each process in ``pids`` and of its descendants, by
    ``<pid> <command name>`` (the processes run as long as the burst)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                text = stream.read()
        except OSError:
            continue  # gone meanwhile
        # The command name is in parentheses and may hold spaces: split after it.
        fields = text[text.rindex(")") + 2:].split()
        name = text[text.index("(") + 1:text.rindex(")")]
        stats[int(entry)] = [name, *fields]
        children.setdefault(int(fields[1]), []).append(int(entry))
    ticks = os.sysconf("SC_CLK_TCK")
    result = {}
    todo = list(pids)
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        if pid in stats:
            # fields after the name: state ppid ... utime (14th of stat) stime (15th)
            utime, stime = int(stats[pid][12]), int(stats[pid][13])
            result[f"{pid} {stats[pid][0]}"] = (utime + stime) / ticks
    return result


def tcp_counters() -> dict[str, int]:
    """The kernel's listen-queue overflow and reset counters (/proc/net/netstat, snmp)."""
    wanted = {"ListenOverflows", "ListenDrops", "TCPAbortOnData", "TCPAbortOnClose",
              "EstabResets", "OutRsts"}
    found: dict[str, int] = {}
    for path in ("/proc/net/netstat", "/proc/net/snmp"):
        with open(path) as stream:
            lines = stream.read().splitlines()
        for names, values in zip(lines[::2], lines[1::2], strict=True):
            for name, value in zip(names.split()[1:], values.split()[1:], strict=True):
                if name in wanted:
                    found[name] = int(value)
    return found


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p99 and max (ms) of sorted ``values`` in seconds."""
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return {"p50": round(statistics.median(values) * 1000, 1), "p99": round(p99 * 1000, 1),
            "max": round(values[-1] * 1000, 1)}


def log_summary(text: str) -> dict:
    """ERROR and WARNING lines of a log: counts and a few distinct messages."""
    errors = [line for line in text.splitlines() if " ERROR " in line]
    warnings = [line for line in text.splitlines() if " WARNING " in line]

    def distinct(lines):
        # Drop the timestamp, pid, request id and UUIDs so that repeats count once.
        messages = Counter(UUID_RE.sub("<uuid>", REQUEST_RE.sub("", line.split(" ", 4)[-1]))
                           [:300] for line in lines)
        return [f"{count}x {msg}" for msg, count in messages.most_common(5)]

    return {"errors": len(errors), "warnings": len(warnings),
            "first_errors": distinct(errors), "first_warnings": distinct(warnings)}


# --- the two sides ---

def run_ours(args, workdir: Path, bodies: list[bytes]) -> dict:
    """Our API and two workers on a fresh PostgreSQL database and RabbitMQ vhost."""
    db_url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    vhost = services.create_vhost()
    procs = []
    engine = None
    try:
        config = write_config(workdir / "dbsync.conf", {"database": {"connection": db_url}})
        subprocess.run([*console_script("ironic-inspection", "inspection.cli"),
                        "--config-file", str(config), "dbsync"], check=True,
                       capture_output=True)
        engine = create_engine(db_url)
        started = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        insert(engine, Node.__table__, our_rows(args.nodes, started))
        insert(engine, Port.__table__, our_ports(args.nodes))
        with engine.begin() as conn:  # explicit ids: move the sequences past them
            for table in ("nodes", "ports"):
                conn.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                     f"(SELECT max(id) FROM {table}))"))
        procs = [start_worker(workdir, db_url, vhost, name=f"worker{i}") for i in (1, 2)]
        api = start_api(workdir, db_url, vhost)
        procs.append(api)
        for proc in procs[:2]:
            proc.wait_ready(120)
        api.wait_http(120)
        result = burst(api.url, engine, bodies, args, [proc.pid for proc in procs])
        result["logs"] = {proc.name: log_summary(proc.log_text()) for proc in procs}
        return result
    finally:
        for proc in procs:
            proc.stop(30)
        if engine is not None:
            engine.dispose()
        if not args.keep:
            services.drop_database(services.PG_ADMIN_URL, db_url)
        services.delete_vhost(vhost)


def enrol_template(ironic: Ironic) -> str:
    """Node 0 through Ironic's API: created, 2 ports, manageable, then ``inspect wait``."""
    resp = ironic.call("POST", "/v1/nodes", json={
        "name": "burst-0", "uuid": node_uuid(0), "driver": "fake-hardware",
        "inspect_interface": "agent", "driver_info": {"ipmi_address": bmc(0)}})
    if resp.status_code != 201:
        raise SystemExit(f"node create: {resp.status_code} {resp.text}")
    for number in (0, 1):
        resp = ironic.call("POST", "/v1/ports", json={
            "address": mac(number), "node_uuid": node_uuid(0), "pxe_enabled": number == 0})
        if resp.status_code != 201:
            raise SystemExit(f"port create: {resp.status_code} {resp.text}")
    for target, state in (("manage", "manageable"), ("inspect", "inspect wait")):
        resp = ironic.call("PUT", f"/v1/nodes/{node_uuid(0)}/states/provision",
                           json={"target": target})
        if resp.status_code != 202:
            raise SystemExit(f"{target}: {resp.status_code} {resp.text}")
        ironic.wait_state(node_uuid(0), state, timeout=120)
    return node_uuid(0)


def clone_template(engine: sa.Engine, nodes: int) -> dict:
    """Copy node 0's rows (as Ironic wrote them) to nodes 1.. with their own identity."""
    meta = sa.MetaData()
    node_table = sa.Table("nodes", meta, autoload_with=engine)
    port_table = sa.Table("ports", meta, autoload_with=engine)
    # Ironic writes ``inspect wait`` before its task lets go of the node: copying the row
    # before that would copy the conductor's lock onto every node (409 on each callback).
    deadline = time.monotonic() + 60
    while True:
        with engine.connect() as conn:
            template = dict(conn.execute(sa.select(node_table).where(
                node_table.c.uuid == node_uuid(0))).mappings().one())
        if template["reservation"] is None:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"node 0 still reserved by {template['reservation']}")
        time.sleep(0.2)
    with engine.begin() as conn:
        template_ports = [dict(row) for row in conn.execute(
            sa.select(port_table).where(port_table.c.node_id == template["id"])
            .order_by(port_table.c.address)).mappings()]
        internal = json.loads(template["driver_internal_info"])
        if internal.get("lookup_bmc_addresses") != [bmc(0)]:
            raise SystemExit(f"Ironic cached no BMC address for node 0: {internal}")
        rows = []
        for i in range(1, nodes):
            row = {**template, "uuid": node_uuid(i), "name": f"burst-{i}",
                   "driver_info": json.dumps({"ipmi_address": bmc(i)}),
                   "driver_internal_info": json.dumps(
                       {**internal, "lookup_bmc_addresses": [bmc(i)]})}
            row.pop("id")
            rows.append(row)
        conn.execute(node_table.insert(), rows)
        ids = dict(conn.execute(sa.select(node_table.c.uuid, node_table.c.id)).all())
        ports = []
        for i in range(1, nodes):
            for number, port in enumerate(template_ports):
                row = {**port, "uuid": str(uuid.UUID(int=0xB0258 << 64 | 2 * i + number,
                                                     version=4)),
                       "address": mac(2 * i + number), "node_id": ids[node_uuid(i)]}
                row.pop("id")
                ports.append(row)
        conn.execute(port_table.insert(), ports)
    return {"provision_state": template["provision_state"],
            "reservation": template["reservation"],
            "target_provision_state": template["target_provision_state"],
            "driver_internal_info": internal, "power_state": template["power_state"],
            "conductor_affinity": template["conductor_affinity"],
            "ports": [{"address": p["address"], "pxe_enabled": p["pxe_enabled"]}
                      for p in template_ports]}


def run_ironic(args, workdir: Path, bodies: list[bytes]) -> dict:
    """Ironic 39 (API and conductor in one process) on a fresh PostgreSQL database."""
    db_url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    ironic = Ironic(workdir, db_url, None)
    engine = create_engine(db_url)
    try:
        ironic.create_schema()
        ironic.start()
        enrol_template(ironic)
        template = clone_template(engine, args.nodes)
        result = burst(ironic.url, engine, bodies, args, [ironic.proc.pid])
        result["template"] = template
        result["logs"] = {"ironic": log_summary(ironic.log_path.read_text(errors="replace"))}
        return result
    finally:
        ironic.stop()
        engine.dispose()
        if not args.keep:
            services.drop_database(services.PG_ADMIN_URL, db_url)


def insert(engine: sa.Engine, table: sa.Table, rows) -> None:
    """Insert ``rows`` with SQLAlchemy core in batches (the table's types encode JSON)."""
    rows = list(rows)
    with engine.begin() as conn:
        for first in range(0, len(rows), 2000):
            conn.execute(table.insert(), rows[first:first + 2000])


# --- the report ---

def summarise(runs: list[dict]) -> dict:
    """Median and min-max over runs of each side's headline figures, and the ratios."""
    def spread(side: str, getter) -> dict:
        values = [getter(run[side]) for run in runs]
        known = [v for v in values if v is not None]
        if not known:
            return {"median": None, "min": None, "max": None, "runs": values}
        return {"median": statistics.median(known), "min": min(known), "max": max(known),
                "runs": values}

    def last_manageable(result: dict) -> float:
        # When the last node that got there became manageable (the curve's last rise).
        rises = [t for (t, managed, _), (_, before, _) in
                 zip(result["curve"][1:], result["curve"], strict=False) if managed > before]
        return rises[-1] if rises else result["curve"][0][0]

    figures = {
        "all_manageable_s": lambda r: r["all_manageable_s"],
        "last_manageable_s": last_manageable,
        "manageable": lambda r: r["manageable"],
        "accepted_per_s": lambda r: r["accepted_per_s"],
        "answer_p50_ms": lambda r: r["answer_ms"]["p50"],
        "answer_p99_ms": lambda r: r["answer_ms"]["p99"],
        "answer_max_ms": lambda r: r["answer_ms"]["max"],
        "lost": lambda r: r["lost"],
        "load_median": lambda r: r["load_1min"]["median"],
        "load_max": lambda r: r["load_1min"]["max"],
        "cpu_s": lambda r: r["cpu_s_total"],
        "cpu_ms_per_callback": lambda r: round(r["cpu_s_total"] * 1000 / r["nodes"], 1),
    }
    summary = {side: {name: spread(side, getter) for name, getter in figures.items()}
               for side in ("ours", "ironic")}
    ours, theirs = summary["ours"], summary["ironic"]
    for name in ("all_manageable_s", "last_manageable_s", "answer_p50_ms", "cpu_s"):
        if ours[name]["median"] and theirs[name]["median"]:
            summary[f"{name}_ratio"] = round(theirs[name]["median"] / ours[name]["median"], 1)
    if ours["accepted_per_s"]["median"] and theirs["accepted_per_s"]["median"]:
        summary["accepted_per_s_ratio"] = round(
            ours["accepted_per_s"]["median"] / theirs["accepted_per_s"]["median"], 1)
    summary["statuses"] = {side: [run[side]["statuses"] for run in runs]
                           for side in ("ours", "ironic")}
    return summary


def main() -> None:
    """Run ``--runs`` bursts per side (alternating which goes first); print and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--senders", type=int, default=64)
    parser.add_argument("--bound", type=float, default=1800,
                        help="seconds from the first callback after which a node not "
                             "manageable is lost")
    parser.add_argument("--stall", type=float, default=180,
                        help="stop waiting when no node changed state for this long")
    parser.add_argument("--sides", default="ours,ironic")
    parser.add_argument("--baseline-venvs", default=os.environ.get(
        "THIRDPARTY_VENV_DIR", str(ROOT / ".venvs")),
        help="directory holding ironic39/ (as $THIRDPARTY_VENV_DIR)")
    parser.add_argument("--workdir")
    parser.add_argument("--keep", action="store_true", help="keep databases and logs")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "burst.json"))
    parser.add_argument("--summarise", action="store_true",
                        help="only recompute the summary of --output from its runs")
    args = parser.parse_args()
    if args.summarise:
        result = json.loads(Path(args.output).read_text())
        result["summary"] = summarise(result["runs"])
        Path(args.output).write_text(json.dumps(result) + "\n")
        print(json.dumps(result["summary"], indent=1))
        return
    # SIGTERM unwinds like an exception: the services are stopped, databases dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ["THIRDPARTY_VENV_DIR"] = args.baseline_venvs
    template = json.loads(FIXTURE.read_text())
    bodies = [callback_body(template, i, args.nodes) for i in range(args.nodes)]
    sides = args.sides.split(",")
    runners = {"ours": run_ours, "ironic": run_ironic}
    runs = []
    with tempfile.TemporaryDirectory(prefix="burst-bench-") as tmp:
        base = Path(args.workdir or tmp)
        for number in range(args.runs):
            run = {}
            # Alternate which side goes first, so that neither always follows the other.
            for side in sides if number % 2 == 0 else sides[::-1]:
                workdir = base / f"run{number + 1}-{side}"
                workdir.mkdir(parents=True, exist_ok=True)
                print(f"run {number + 1}: {side}...", file=sys.stderr, flush=True)
                run[side] = runners[side](args, workdir, bodies)
                brief = {k: v for k, v in run[side].items()
                         if k not in ("curve", "load_samples", "answer_times_ms", "logs",
                                      "template", "answers")}
                print(json.dumps(brief), file=sys.stderr, flush=True)
            runs.append(run)
    result = {"nodes": args.nodes, "senders": args.senders, "runs": runs}
    if set(sides) == {"ours", "ironic"}:
        result["summary"] = summarise(runs)
        print(json.dumps(result["summary"], indent=1))
    if args.output:
        Path(args.output).write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
