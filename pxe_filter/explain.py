"""``ironic-pxe-filter explain MAC``: what dnsmasq will do for one MAC, and why.

The answer comes from what dnsmasq reads (the MAC's own file, else the wildcard), the
database's verdict (the same lookup and policy the daemon uses), the daemon's state file and
the last DHCP dnsmasq reported for the MAC. It works whether or not the daemon runs, and says
which. Exit status: 0 answered; 2 bad usage, an invalid MAC or configuration; 1 the hostsdir
cannot be read.
"""

import argparse
import json
import os
import sys
import time

from oslo_config import cfg

from pxe_filter import leases, policy
from pxe_filter.common import macs
from pxe_filter.common.database import DatabaseError, engine_from_conf
from pxe_filter.hostsdir_cache import WILDCARD, WILDCARD_MAC, parse
from pxe_filter.source import DatabaseSource, PortView
from pxe_filter.status import command as status_cmd
from pxe_filter.status import recorder as state

PROG = "ironic-pxe-filter explain"


def read_entry(hostsdir: str, name: str, mac: str) -> tuple[str | None, bool | None]:
    """The first line of file ``name`` in the hostsdir (None if there is no such file), and
    whether dnsmasq reads it as allowing ``mac`` (None: neither allow nor deny)."""
    try:  # never through a symbolic link
        with open(os.path.join(hostsdir, name), "rb",
                  opener=lambda path, flags: os.open(path, flags | os.O_NOFOLLOW)) as stream:
            data = stream.read(128)
    except FileNotFoundError:
        return None, None
    line = data.decode(errors="replace").split("\n", 1)[0]
    return line, parse(mac, f"{line}\n".encode())


def what_dnsmasq_does(own: bool | None, wildcard: bool | None) -> tuple[bool, str]:
    """(served, which entry decides) from what the MAC's file and the wildcard file say."""
    if own is not None:
        return own, f"its file says {'allow' if own else 'deny'}"
    if wildcard is None:
        # The rendered configuration ignores clients that no entry matched (tag:!known).
        return False, "no entry matches it (no wildcard file): dnsmasq ignores it"
    return wildcard, f"no file of its own: the wildcard says {'allow' if wildcard else 'deny'}"


def database_reason(conf: cfg.ConfigOpts, mac: str, settings: policy.Settings
                    ) -> tuple[bool, str, PortView | None]:
    """(allowed, one-sentence reason, its port's node) as the database says now."""
    scope = settings.scope
    engine = engine_from_conf(conf, read_only=True)
    try:
        found = DatabaseSource(engine, conf.pxe_filter.database_read_timeout).lookup(
            [mac], supported_interfaces=settings.supported_interfaces, scope=scope)
    finally:
        engine.dispose()
    view = found.ports.get(mac)
    if view is not None:
        verdict = settings.verdict(view)
        node = f"node {view.node_uuid}" if view.node_uuid else "a port without a node"
        where = f"{node} is in {view.provision_state} with inspect_interface " \
                f"{view.inspect_interface}"
        if verdict is not None:
            if verdict:
                return True, where, view
            if not scope.contains(view.conductor_group, view.shard):
                return False, f"{node} is outside this filter's scope ({scope.describe()})", view
            served = ", ".join(sorted(settings.supported_interfaces))
            return False, (f"{where}: only nodes in inspect wait or inspecting with "
                           f"inspect_interface in {served} are served"), view
        where = f"{node} is outside this filter's scope, left to the unknown-MAC policy"
    else:
        where = "no port has this MAC"
    unknown = settings.unknown_allowed(found.any_served)
    if settings.deny_unknown_macs:
        why = "[pxe_filter]deny_unknown_macs is set"
    elif settings.discovery_enabled:
        why = "auto-discovery is enabled"
    else:
        why = "a node is on inspection" if found.any_served else "no node is on inspection"
    return unknown, f"{where}: unknown MACs are {'allowed' if unknown else 'denied'} ({why})", \
        view


def explain(conf: cfg.ConfigOpts, mac: str) -> dict:
    """The answer for canonical ``mac``; raises OSError if the hostsdir cannot be read."""
    status_path = state.path_of(conf)
    hostsdir = os.path.abspath(conf.pxe_filter.dhcp_hostsdir)
    line, own = read_entry(hostsdir, mac, mac)
    wildcard = read_entry(hostsdir, WILDCARD, WILDCARD_MAC)[1]
    served, entry = what_dnsmasq_does(own, wildcard)
    try:
        running, verdict = status_cmd.assess(status_cmd.load(status_path))
    except FileNotFoundError:
        running, verdict = False, "not running (no state file)"
    except (OSError, ValueError) as exc:
        running, verdict = False, f"unknown: cannot read the state file {status_path} ({exc})"
    try:
        allowed, reason, view = database_reason(conf, mac, policy.Settings.from_conf(conf))
    except DatabaseError as exc:
        allowed, reason, view = None, f"the database does not answer ({exc})", None
    if allowed is None:
        reason = f"{entry}; {reason}"
    elif allowed != served:
        fix = "the daemon corrects it within seconds" if running else \
            "nothing corrects it while ironic-pxe-filter is not running"
        reason = (f"{reason}, but {entry} (dnsmasq does what the files say): {fix}")
    last = leases.load(leases.book_path(status_path)).get(mac)
    return {"mac": mac, "decision": "allow" if served else "deny", "reason": reason,
            "node": view.node_uuid if view else None,
            "provision_state": view.provision_state if view else None,
            "file": line, "wildcard": "allow" if wildcard else "deny",
            "last_dhcp": last, "daemon": verdict, "daemon_running": running}


def render_human(answer: dict) -> str:
    """The answer as a few lines."""
    last = answer["last_dhcp"]
    seen = "none seen"
    if last:
        seen = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last["time"])) \
            + f" ({last['address']})"
    return "\n".join([
        f"{answer['mac']}: dnsmasq will {answer['decision'].upper()} it",
        f"  why:            {answer['reason']}",
        f"  node:           {answer['node'] or 'none'} ({answer['provision_state'] or '-'})",
        f"  its file:       {answer['file'] or 'none'}",
        f"  wildcard:       {answer['wildcard']}",
        f"  last DHCP:      {seen}",
        f"  filter daemon:  {answer['daemon']}"])


def run(args: argparse.Namespace, conf: cfg.ConfigOpts) -> int:
    """Print the answer for the MAC of ``args``; returns the exit status."""
    try:
        found = explain(conf, macs.normalize_mac(args.mac))
    except macs.InvalidMAC as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"{PROG}: configuration error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: cannot read the hostsdir: {exc.strerror or exc}", file=sys.stderr)
        return 1
    status_cmd.emit(json.dumps(found, indent=1, sort_keys=True) if args.format == "json"
                    else render_human(found))
    return 0
