"""Benchmark: one 1000-node page of GET /v1/nodes out of 10,000, ours beside Ironic 39's API.

Both APIs run as their real servers (ours: ``ironic-inspection-api``, waitress; Ironic's:
``ironic``, API and conductor in one process, noauth, fake hardware) on SQLite databases
holding the same nodes (made by our migrations, and by Ironic's own ``ironic-dbsync
create_schema``; the data set of ``inspection_bench.py``). Each run times ``--requests``
requests per list form after a warm-up, from the middle of the list (``marker``); the runs
alternate the two sides. Reported per side and form: the median of the runs' p50 and the
spread (slowest run p50 / fastest run p50). Not a test: nothing here asserts a timing.

    .venv/bin/python bench/api_bench.py [--nodes 10000] [--runs 3] [--requests 20]
        [--baseline-python .venvs/ironic39/bin/python] [--output F.json]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
HEADERS = {"X-OpenStack-Ironic-API-Version": "1.96"}
FORMS = {"brief": "/v1/nodes", "detail": "/v1/nodes/detail"}
PAGE = 1000


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ironic_db(args) -> None:
    """(Baseline venv) Ironic's schema by its own dbsync, then the data set."""
    import sqlalchemy as sa  # noqa: PLC0415 - baseline venv only
    from inspection_bench import insert, node_rows, port_rows  # noqa: PLC0415
    from ironic.db.sqlalchemy import models  # noqa: PLC0415

    dbsync = os.path.join(os.path.dirname(sys.executable), "ironic-dbsync")
    subprocess.run([dbsync, "--config-file", args.config, "create_schema"], check=True,
                   capture_output=True)
    engine = sa.create_engine(f"sqlite:///{args.db}")
    insert(engine, models.Node.__table__, node_rows(args.nodes, {"version": "1.40"}))
    insert(engine, models.Port.__table__, port_rows(args.nodes, {"version": "1.12"}))
    engine.dispose()


def write_config(path: str, sections: dict) -> None:
    """An INI file."""
    with open(path, "w") as stream:
        for name, options in sections.items():
            stream.write(f"[{name}]\n")
            stream.writelines(f"{key} = {value}\n" for key, value in options.items())


def start_ironic(args, workdir: str) -> tuple[subprocess.Popen, str]:
    """Ironic 39 on its own database with the data set; its process and URL."""
    port = free_port()
    db = os.path.join(workdir, "ironic.sqlite")
    config = os.path.join(workdir, "ironic.conf")
    interfaces = {f"enabled_{kind}_interfaces": value for kind, value in (
        ("boot", "fake"), ("deploy", "fake"), ("management", "fake"), ("power", "fake"),
        ("network", "noop"), ("console", "no-console"), ("vendor", "no-vendor"),
        ("raid", "no-raid"), ("rescue", "no-rescue"), ("bios", "no-bios"),
        ("firmware", "no-firmware"), ("storage", "noop"), ("inspect", "agent,no-inspect"))}
    write_config(config, {
        "DEFAULT": {"auth_strategy": "noauth", "rpc_transport": "none", "host": "bench",
                    "enabled_hardware_types": "fake-hardware",
                    "default_network_interface": "noop", "default_inspect_interface": "agent",
                    "state_path": workdir, "minimum_memory_warning_only": "true",
                    "log_file": os.path.join(workdir, "ironic.log"), **interfaces},
        "database": {"connection": f"sqlite:///{db}"},
        "api": {"host_ip": "127.0.0.1", "port": port},
        "dhcp": {"dhcp_provider": "none"},
        "conductor": {"automated_clean": "false", "sync_power_state_interval": "-1"},
        "oslo_concurrency": {"lock_path": workdir},
        "oslo_messaging_notifications": {"driver": "noop"},
    })
    subprocess.run([args.baseline_python, os.path.abspath(__file__), "--ironic-db",
                    "--nodes", str(args.nodes), "--db", db, "--config", config],
                   check=True, env={**os.environ, "PYTHONPATH": HERE})
    binary = os.path.join(os.path.dirname(args.baseline_python), "ironic")
    proc = subprocess.Popen([binary, "--config-file", config], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def start_ours(args, workdir: str) -> tuple[subprocess.Popen, str]:
    """ironic-inspection-api on our database with the data set; its process and URL."""
    sys.path.insert(0, os.path.join(HERE, ".."))
    from inspection_bench import insert, node_rows, port_rows  # noqa: PLC0415

    from inspection.db import migration  # noqa: PLC0415 - project venv
    from inspection.db.models import Node, Port  # noqa: PLC0415
    from pxe_filter.common.database import create_engine  # noqa: PLC0415

    port = free_port()
    db = os.path.join(workdir, "ours.sqlite")
    engine = create_engine(f"sqlite:///{db}")
    migration.upgrade(engine)
    insert(engine, Node.__table__, node_rows(args.nodes))
    insert(engine, Port.__table__, port_rows(args.nodes))
    engine.dispose()
    config = os.path.join(workdir, "ours.conf")
    write_config(config, {"DEFAULT": {"host": "bench"},
                          "database": {"connection": f"sqlite:///{db}"},
                          "api": {"auth_strategy": "noauth", "port": port}})
    binary = os.path.join(os.path.dirname(sys.executable), "ironic-inspection-api")
    proc = subprocess.Popen([binary, "--config-file", config], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def wait_up(proc: subprocess.Popen, url: str, timeout: float = 180) -> None:
    """Until ``url``/v1 answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{url}: the server exited {proc.returncode}")
        try:
            if requests.get(url + "/v1", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    sys.exit(f"{url} did not answer within {timeout} s")


def p50(session: requests.Session, url: str, marker: str, count: int) -> float:
    """Median (ms) of ``count`` requests for one 1000-node page after ``marker``."""
    params = {"limit": PAGE, "marker": marker}
    times = []
    for _ in range(count + 3):
        start = time.perf_counter()
        resp = session.get(url, params=params, headers=HEADERS, timeout=120)
        times.append((time.perf_counter() - start) * 1000)
        assert resp.status_code == 200, resp.text[:300]
        assert len(resp.json()["nodes"]) == PAGE
    return statistics.median(times[3:])  # the first three warm caches up


def main() -> None:
    """Start both servers, time alternating runs, print (and write) the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--baseline-python", default=os.environ.get(
        "BASELINE_PYTHON", ".venvs/ironic39/bin/python"))
    parser.add_argument("--output")
    parser.add_argument("--ironic-db", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ironic_db:
        ironic_db(args)
        return
    from inspection_bench import uuid_for  # noqa: PLC0415

    marker = uuid_for(args.nodes // 2 - PAGE // 2)
    with tempfile.TemporaryDirectory(prefix="api-bench-") as workdir:
        servers = {"ours": start_ours(args, workdir), "ironic": start_ironic(args, workdir)}
        try:
            for proc, url in servers.values():
                wait_up(proc, url)
            samples: dict = {side: {form: [] for form in FORMS} for side in servers}
            sessions = {side: requests.Session() for side in servers}
            for run in range(args.runs):
                order = list(servers) if run % 2 == 0 else list(reversed(servers))
                for side in order:
                    for form, path in FORMS.items():
                        samples[side][form].append(p50(sessions[side], servers[side][1] + path,
                                                       marker, args.requests))
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(30)
    results: dict = {"nodes": args.nodes, "page": PAGE, "runs": args.runs,
                     "requests_per_run": args.requests}
    for side, forms in samples.items():
        results[side] = {form: {"p50_ms": round(statistics.median(values), 1),
                                "spread": round(max(values) / min(values), 2),
                                "run_p50s_ms": [round(v, 1) for v in values]}
                         for form, values in forms.items()}
    results["ours_vs_ironic"] = {form: round(results["ours"][form]["p50_ms"]
                                             / results["ironic"][form]["p50_ms"], 2)
                                 for form in FORMS}
    text = json.dumps(results, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as stream:
            stream.write(text + "\n")


if __name__ == "__main__":
    main()
