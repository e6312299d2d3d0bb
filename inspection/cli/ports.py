"""``ironic-inspection port ...``: the MACs of nodes."""

import argparse
import sys

from inspection.cli import output
from inspection.cli.errors import CommandError
from inspection.cli.http import ApiClient, add_api_options, quote
from pxe_filter.common.macs import InvalidMAC, normalize_mac

COLUMNS = ("uuid", "address", "node_uuid", "pxe_enabled", "physical_network")


def add_commands(sub, parent: argparse.ArgumentParser) -> None:
    """Register ``port`` and its sub-commands."""
    port = sub.add_parser("port", help="manage ports (MAC addresses of nodes)")
    psub = port.add_subparsers(dest="port_command", metavar="COMMAND", required=True)
    p = psub.add_parser("create", help="add a MAC address to a node")
    add_api_options(p)
    p.add_argument("address", metavar="MAC")
    p.add_argument("--node", required=True, help="UUID or name of the node")
    p.add_argument("--pxe-enabled", action=argparse.BooleanOptionalAction, default=None,
                   help="whether the node PXE boots from this NIC (default true)")
    p.add_argument("--physical-network")
    p.set_defaults(func=run_create)
    p = psub.add_parser("list", help="list ports")
    add_api_options(p)
    p.add_argument("--node", help="only the ports of this node (UUID or name)")
    p.set_defaults(func=run_list)
    p = psub.add_parser("delete", help="delete a port")
    add_api_options(p)
    p.add_argument("port", metavar="UUID")
    p.set_defaults(func=run_delete)


def run_create(args: argparse.Namespace) -> int:
    """Create a port (the MAC is checked here first for a clearer message)."""
    try:
        address = normalize_mac(args.address)
    except InvalidMAC as exc:
        raise CommandError(str(exc)) from None
    body = {"address": address, "node_uuid": args.node}
    if args.pxe_enabled is not None:
        body["pxe_enabled"] = args.pxe_enabled
    if args.physical_network:
        body["physical_network"] = args.physical_network
    port = ApiClient.from_args(args).post("/v1/ports", body)
    output.emit_record(args, port, COLUMNS)
    return 0


def run_list(args: argparse.Namespace) -> int:
    """List ports."""
    ports = ApiClient.from_args(args).get_all("/v1/ports", "ports", node=args.node)
    output.emit_list(args, ports, COLUMNS)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    """Delete a port."""
    ApiClient.from_args(args).delete(f"/v1/ports/{quote(args.port)}")
    print(f"Deleted port {args.port}.", file=sys.stderr)
    return 0
