"""``ironic-pxe-filter status``: the daemon's figures from its state file, for humans or JSON.

Exit status: 0 the daemon runs; 3 it does not (no state file, stopped, or a stale pid: the
last figures are still shown); 2 bad usage or configuration; 1 an unreadable state file.
"""

import argparse
import json
import os
import sys

from oslo_config import cfg

from pxe_filter.status import recorder as state

PROG = "ironic-pxe-filter status"
NOT_RUNNING = 3


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            cmdline = stream.read()
    except OSError:
        return False
    return b"ironic-pxe-filter" in cmdline or b"pxe_filter" in cmdline


def load(path: str) -> dict:
    """The state file's content; raises OSError, or ValueError if it is not a JSON object."""
    with open(path) as stream:
        data = json.load(stream)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def assess(data: dict) -> tuple[bool, str]:
    """(running, one-line verdict) for a state file's content."""
    pid = data.get("pid")
    if not data.get("running", True):
        return False, f"not running: stopped at {data.get('stopped_at')}"
    if not _pid_alive(pid):
        return False, (f"not running: pid {pid} in the state file is gone (stale since "
                       f"{data.get('updated_at')}; the figures below are from then)")
    return True, f"running (pid {pid})"


def _line(label: str, value: object) -> str:
    return f"  {label + ':':<20} {value}"


def render_human(data: dict, verdict: str) -> str:
    """The figures as a few aligned lines."""
    sync = data.get("last_sync") or {}
    bcast = data.get("last_broadcast")
    errors = data.get("errors") or {}
    dnsmasq = data.get("dnsmasq") or {}
    repair = data.get("last_repair") or {}
    lines = [f"ironic-pxe-filter: {verdict}",
             _line("hostsdir", data.get("hostsdir")),
             *([_line("serving", data["scope"])] if "scope" in data else []),
             _line("allowed MACs", data.get("allowed")),
             _line("denied MACs", data.get("denied")),
             _line("unknown MACs", f"{data.get('wildcard')} (wildcard)"),
             _line("last sync", f"{sync.get('at')} in {sync.get('duration_s')} s, "
                                f"{sync.get('written')} written, {sync.get('failed')} failed"
                   if sync else "none yet"),
             _line("syncs", data.get("syncs")),
             _line("last broadcast", f"{bcast['at']}: {bcast['allowed']} allowed, "
                                     f"{bcast['denied']} denied, {bcast['rejected']} "
                                     f"rejected, {bcast['written']} written"
                   if bcast else "none"),
             _line("broadcasts", data.get("broadcasts")),
             _line("files repaired", f"{data.get('repaired')}"
                   + (f" (last {repair.get('at')}: {', '.join(repair.get('files', []))})"
                      if repair else "")),
             _line("errors", f"{errors.get('count', 0)}"
                   + (f" (last {errors.get('last_at')}: {errors.get('last')})"
                      if errors.get("last") else "")),
             _line("fail closed", f"YES: {data.get('fail_closed_reason')}"
                   if data.get("fail_closed") else "no"),
             _line("dnsmasq control", dnsmasq.get("control"))]
    details = [f"{key} {dnsmasq[key]}" for key in ("unit", "pid", "running", "reloads",
                                                  "last_reload", "restarts")
               if key in dnsmasq]
    if details:
        lines.append(_line("dnsmasq", ", ".join(details)))
    notes = data.get("notifications")
    if notes is not None:
        lines.append(_line("notifications", ", ".join(f"{count} {what}" for what, count
                                                       in notes.items()) or "none yet"))
    lines.append(_line("updated", data.get("updated_at")))
    return "\n".join(lines)


def emit(text: str) -> None:
    """Print ``text``; a reader that left early (`| head -c 1`) is not an error of ours."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        # What is still buffered must not fail again at exit: stdout goes nowhere now.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run(args: argparse.Namespace, conf: cfg.ConfigOpts) -> int:
    """Print the figures of the state file of ``conf``; returns the exit status."""
    path = state.path_of(conf)
    try:
        data = load(path)
    except FileNotFoundError:
        message = (f"ironic-pxe-filter is not running, or has not finished its first sync: "
                   f"no state file {path}")
        emit(json.dumps({"running": False, "state_file": path, "message": message})
             if args.format == "json" else message)
        return NOT_RUNNING
    except (OSError, ValueError) as exc:
        print(f"{PROG}: cannot read the state file {path}: {exc}", file=sys.stderr)
        return 1
    running, verdict = assess(data)
    data.update(running=running, state_file=path, message=verdict)
    emit(json.dumps(data, indent=1, sort_keys=True) if args.format == "json"
         else render_human(data, verdict))
    return 0 if running else NOT_RUNNING
