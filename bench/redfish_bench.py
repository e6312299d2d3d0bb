"""Benchmark: out-of-band (Redfish) inspections per minute against sushy-tools' emulator,
beside in-band processing time. Not a test: nothing here asserts a timing.

Each run, on a fresh SQLite database and the API all-in-one (its BMC actor, default
``[bmc]`` options):
- fleet: ``--nodes`` nodes (each its own emulator system with 2 NICs and 2 drives) inspected
  together: inspections per minute from the first ``inspect`` to the last ``manageable``;
- one at a time: single nodes from ``inspect`` to ``manageable``; inside the BMC actor's
  step, the time its BMC call took (the BMC's answer time: session, then every GET) and the
  rest of the step (ours: reservation, hooks, rules, storing, commit); and the ``inspect``
  API request's own time;
- in-band: ``accept`` + ``process`` of the Dell ramdisk callback (tests/fixtures/inventories)
  with the default hooks: what processing costs once the ramdisk has booted and sent it.
The median of ``--runs`` runs is reported with the spread (min-max).

    .venv/bin/python bench/redfish_bench.py [--nodes 100] [--runs 3] [--single 20]
        [--output bench/results/redfish.json]
"""

import argparse
import json
import logging
import os
import pathlib
import statistics
import sys
import tempfile
import time
import uuid

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
FIXTURE = HERE.parent / "tests" / "fixtures" / "inventories" / "uefi-dell-r640.json"
GIB = 1024 ** 3
DRIVES = [{"Id": "D1", "Name": "Drive 1", "CapacityBytes": 480 * GIB, "MediaType": "SSD"},
          {"Id": "D2", "Name": "Drive 2", "CapacityBytes": 2000 * GIB, "MediaType": "HDD"}]
HOOKS = "validate-interfaces,ports"  # the emulator's fake systems state no architecture


def make_api(workdir: pathlib.Path, **bmc):
    from inspection.db import migration  # noqa: PLC0415
    from pxe_filter.common.database import create_engine  # noqa: PLC0415
    from tests.integration.api_helpers import Api, api_conf  # noqa: PLC0415

    workdir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{workdir}/bench.sqlite"
    conf = api_conf(workdir, url, redfish={"inspection_hooks": HOOKS},
                    inspector={"add_ports": "all"}, bmc=bmc)
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    return Api(conf)


def add_nodes(api, emulator, indexes) -> list[str]:
    import sqlalchemy as sa  # noqa: PLC0415

    from inspection.db.models import Node  # noqa: PLC0415

    uuids = [str(uuid.uuid4()) for _ in indexes]
    with api.context.engine.begin() as conn:
        conn.execute(sa.insert(Node), [
            {"uuid": u, "name": f"n{i}", "driver": "redfish", "inspect_interface": "redfish",
             "driver_info": emulator.driver_info(i), "provision_state": "manageable",
             "driver_internal_info": {}, "properties": {}, "extra": {}}
            for u, i in zip(uuids, indexes, strict=True)])
    return uuids


def states(api, uuids) -> dict[str, str]:
    import sqlalchemy as sa  # noqa: PLC0415

    from inspection.db.models import Node  # noqa: PLC0415

    with api.context.engine.connect() as conn:
        return dict(conn.execute(sa.select(Node.uuid, Node.provision_state)
                                 .where(Node.uuid.in_(uuids))).all())


def inspect(api, ident: str) -> None:
    resp = api.client.put(f"/v1/nodes/{ident}/states/provision", json={"target": "inspect"})
    assert resp.status_code == 202, resp.json


def wait_done(api, uuids, timeout: float = 600, pause: float = 0.005) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        now = states(api, uuids)
        if all(s != "inspecting" for s in now.values()):
            return now
        if time.monotonic() > deadline:
            raise TimeoutError("inspections did not finish")
        time.sleep(pause)


def fleet(workdir, emulator, nodes: int) -> dict:
    api = make_api(workdir)
    try:
        uuids = add_nodes(api, emulator, range(nodes))
        started = time.perf_counter()
        for ident in uuids:
            inspect(api, ident)
        final = wait_done(api, uuids, pause=0.05)
        elapsed = time.perf_counter() - started
        pool = api.context.dispatcher.power.pool
        return {"seconds": elapsed, "per_minute": nodes / elapsed * 60,
                "manageable": sum(s == "manageable" for s in final.values()),
                "most_sessions_open": pool.most_open}
    finally:
        api.close()


class StepTimes:
    """Wraps the BMC actor's step and its BMC call to time them (in this process only)."""

    def __init__(self) -> None:
        from inspection.power.actor import PowerActor  # noqa: PLC0415

        self.steps: list[float] = []
        self.bmc: list[float] = []
        for name, into in (("step", self.steps), ("_bmc", self.bmc)):
            setattr(PowerActor, name, self._timed(getattr(PowerActor, name), into))

    @staticmethod
    def _timed(func, into: list[float]):
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                into.append(time.perf_counter() - started)
        return timed


def one_at_a_time(workdir, emulator, count: int, times: StepTimes) -> dict:
    api = make_api(workdir)
    try:
        uuids = add_nodes(api, emulator, range(count))
        total, requests, ours, reads = [], [], [], []
        for ident in uuids:
            del times.steps[:], times.bmc[:]
            started = time.perf_counter()
            inspect(api, ident)
            requests.append(time.perf_counter() - started)
            assert wait_done(api, [ident])[ident] == "manageable"
            total.append(time.perf_counter() - started)
            time.sleep(0.05)  # the step has returned (its commit came before)
            reads.append(sum(times.bmc))
            ours.append(sum(times.steps) - sum(times.bmc))
        return {"end_to_end_ms": statistics.median(total) * 1000,
                "bmc_read_ms": statistics.median(reads) * 1000,
                "inspect_request_ms": statistics.median(requests) * 1000,
                "ours_in_step_ms": statistics.median(ours) * 1000}
    finally:
        api.close()


def in_band(workdir, repeat: int = 20) -> dict:
    import sqlalchemy as sa  # noqa: PLC0415

    from inspection.db.models import Node  # noqa: PLC0415

    api = make_api(workdir)
    try:
        service = api.context.service
        body = json.loads(FIXTURE.read_text())
        times = []
        for _ in range(repeat + 1):
            node_uuid = str(uuid.uuid4())
            with api.context.engine.begin() as conn:
                conn.execute(sa.delete(Node))
                conn.execute(sa.insert(Node).values(
                    uuid=node_uuid, driver="ipmi", provision_state="inspect wait",
                    inspect_interface="agent", driver_internal_info={}, properties={},
                    extra={}, driver_info={}))
            started = time.perf_counter()
            accepted = service.accept(json.loads(json.dumps(body)), node_uuid=node_uuid)
            service.process(accepted.node_uuid, accepted.data)
            times.append(time.perf_counter() - started)
            assert states(api, [node_uuid])[node_uuid] == "manageable"
        return {"processing_ms": statistics.median(times[1:]) * 1000}
    finally:
        api.close()


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--single", type=int, default=20,
                        help="nodes inspected one at a time per run")
    parser.add_argument("--output")
    args = parser.parse_args()
    os.environ.setdefault("THIRDPARTY_VENV_DIR", str(HERE.parent / ".venvs"))
    from tests.support.bmcs import SushyEmulator  # noqa: PLC0415

    logging.disable(logging.WARNING)
    times = StepTimes()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        emulator = SushyEmulator(root / "emulator", count=args.nodes, nics=2,
                                 drives=DRIVES).start()
        try:
            for run in range(args.runs):
                result = {"fleet": fleet(root / f"fleet{run}", emulator, args.nodes),
                          "single": one_at_a_time(root / f"single{run}", emulator,
                                                  args.single, times),
                          "in_band": in_band(root / f"inband{run}"),
                          # Two cores shared with others: the 1-minute load average.
                          "load_1min": os.getloadavg()[0]}
                print(json.dumps(result), flush=True)
                runs.append(result)
        finally:
            emulator.stop()
    summary = {
        "nodes": args.nodes, "runs": runs,
        "per_minute": spread([r["fleet"]["per_minute"] for r in runs]),
        "fleet_seconds": spread([r["fleet"]["seconds"] for r in runs]),
        "bmc_read_ms": spread([r["single"]["bmc_read_ms"] for r in runs]),
        "end_to_end_ms": spread([r["single"]["end_to_end_ms"] for r in runs]),
        "ours_in_step_ms": spread([r["single"]["ours_in_step_ms"] for r in runs]),
        "inspect_request_ms": spread([r["single"]["inspect_request_ms"] for r in runs]),
        "in_band_processing_ms": spread([r["in_band"]["processing_ms"] for r in runs]),
        "load_1min": spread([r["load_1min"] for r in runs]),
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.output:
        pathlib.Path(args.output).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
