"""``scripts/demo`` as a new operator runs it: the whole loop, then Ctrl-C."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.support.services_procs import free_port

REPO = Path(__file__).parents[2]
PAYLOAD = REPO / "scripts" / "demo-ipa-data.json"
MAC = "52:54:00:de:40:01"

pytestmark = pytest.mark.slow


def processes_using(path: Path) -> list[str]:
    """Command lines of running processes that name ``path``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(path).encode() in cmdline:
            found.append(f"{pid}: {cmdline.decode(errors='replace')}")
    return found


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, what()
        time.sleep(0.2)
    return result


def test_demo_enrolls_a_posted_machine_and_denies_its_mac(tmp_path):
    demo_dir, port = tmp_path / "demo", free_port()
    url = f"http://127.0.0.1:{port}"
    output = tmp_path / "demo.out"
    env = dict(os.environ, DEMO_DIR=str(demo_dir), DEMO_PORT=str(port))
    with open(output, "w") as out:
        # Its own session, so that SIGINT reaches the script and its services as Ctrl-C does.
        proc = subprocess.Popen([str(REPO / "scripts" / "demo")], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    try:
        wait_for(lambda: "Ctrl-C stops both" in output.read_text() or proc.poll() is not None,
                 120, output.read_text)
        text = output.read_text()
        assert proc.poll() is None, text
        assert f"The inspection API runs at {url}" in text
        assert f"--data @scripts/demo-ipa-data.json {url}/v1/continue_inspection" in text
        assert f"ironic-inspection node list --url {url}" in text
        assert f"cat {demo_dir}/hostsdir/{MAC}" in text

        resp = requests.post(f"{url}/v1/continue_inspection", data=PAYLOAD.read_bytes(),
                             headers={"Content-Type": "application/json"}, timeout=10)
        assert resp.status_code == 202, resp.text
        node_uuid = resp.json()["uuid"]
        listed = subprocess.run(
            [str(Path(sys.executable).with_name("ironic-inspection")), "node", "list",
             "--url", url, "-f", "json"], capture_output=True, text=True, timeout=30)
        assert listed.returncode == 0, listed.stderr
        [node] = [n for n in json.loads(listed.stdout) if n["uuid"] == node_uuid]
        assert node["auto_discovered"] is True

        mac_file = demo_dir / "hostsdir" / MAC
        # The demo's sync period is 5 s; processing and a loaded machine get the rest.
        wait_for(lambda: mac_file.exists() and mac_file.read_text() == f"{MAC},ignore\n",
                 15, lambda: f"{mac_file}: {mac_file.exists() and mac_file.read_text()!r}")
        assert processes_using(demo_dir / "demo.conf")  # both services run
        # A second demo on the same directory would wipe the first one's database: refused.
        again = subprocess.run([str(REPO / "scripts" / "demo")], capture_output=True,
                               text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
        assert again.returncode == 1 and "A demo already runs" in again.stderr, again
        assert mac_file.read_text() == f"{MAC},ignore\n"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert code == 0, output.read_text()
    assert "Stopped." in output.read_text()
    wait_for(lambda: not processes_using(demo_dir / "demo.conf"), 5,
             lambda: f"left running: {processes_using(demo_dir / 'demo.conf')}")


def test_a_busy_demo_port_is_named_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = dict(os.environ, DEMO_DIR=str(tmp_path / "demo"), DEMO_PORT=str(port))
        done = subprocess.run([str(REPO / "scripts" / "demo")], capture_output=True, text=True,
                              env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert f"DEMO_PORT={port}: 127.0.0.1 port {port} is busy" in done.stderr
    assert "API runs at" not in done.stdout and "stopped by itself" not in done.stderr
