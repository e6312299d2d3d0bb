"""``ironic-inspection node ...``: nodes, their inspection and their stored inventory."""

import argparse
import contextlib
import json
import os
import sys

from inspection.cli import output
from inspection.cli.errors import CommandError
from inspection.cli.http import ApiClient, add_api_options, quote

LIST_COLUMNS = ("uuid", "name", "driver", "provision_state", "maintenance", "auto_discovered")
SHOW_FIELDS = ("uuid", "name", "driver", "provision_state", "target_provision_state",
               "auto_discovered", "inspect_interface", "driver_info", "properties", "extra",
               "last_error", "reservation", "inspection_started_at", "inspection_finished_at",
               "created_at", "updated_at")


def _json_object(option: str):
    def parse(text: str) -> dict:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{option} is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"{option} must be a JSON object")
        return value
    return parse


def add_commands(sub, parent: argparse.ArgumentParser) -> None:
    """Register ``node`` and its sub-commands."""
    node = sub.add_parser("node", help="manage nodes and their inspection")
    nsub = node.add_subparsers(dest="node_command", metavar="COMMAND", required=True)

    def command(name: str, func, help_text: str) -> argparse.ArgumentParser:
        parser = nsub.add_parser(name, help=help_text, description=help_text)
        add_api_options(parser)
        parser.set_defaults(func=func)
        return parser

    p = command("list", run_list, "list nodes")
    p.add_argument("--provision-state", metavar="STATE",
                   help="only nodes in this state (e.g. 'inspect wait', manageable)")
    p.add_argument("--auto-discovered", action="store_true",
                   help="only nodes enrolled by auto-discovery")
    p = command("show", run_show, "show one node (secrets masked)")
    p.add_argument("node", metavar="NODE", help="UUID or name")
    p = command("create", run_create, "enroll a node (state enroll)")
    p.add_argument("--driver", required=True, help="hardware type, e.g. ipmi or redfish")
    p.add_argument("--name")
    p.add_argument("--uuid")
    p.add_argument("--driver-info", type=_json_object("--driver-info"), metavar="JSON")
    p.add_argument("--properties", type=_json_object("--properties"), metavar="JSON")
    p.add_argument("--extra", type=_json_object("--extra"), metavar="JSON")
    p.add_argument("--inspect-interface", help="default agent")
    p.add_argument("--resource-class")
    for name, help_text in (("inspect", "start inspection (node must be manageable)"),
                            ("abort", "abort an inspection waiting for the ramdisk"),
                            ("manage", "move the node to manageable"),
                            ("delete", "delete the node with its ports and inventory")):
        p = command(name, run_state if name != "delete" else run_delete, help_text)
        p.add_argument("node", metavar="NODE", help="UUID or name")
        p.set_defaults(target=name)
    p = command("reprocess", run_reprocess, "run the inspection hooks and rules again on the "
                "node's stored inventory: no boot, no power action, the node keeps its state "
                "(manageable, or enroll after auto-discovery)")
    p.add_argument("node", metavar="NODE", help="UUID or name")
    inventory = nsub.add_parser("inventory", help="the inventory stored by inspection")
    isub = inventory.add_subparsers(dest="inventory_command", metavar="COMMAND",
                                    required=True)
    p = isub.add_parser("save", help="save the stored inventory and plugin data as JSON",
                        description="Write {\"inventory\": ..., \"plugin_data\": ...} to "
                                    "FILE, or to stdout without --file.")
    add_api_options(p)
    p.add_argument("node", metavar="NODE", help="UUID or name")
    p.add_argument("--file", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=run_inventory_save)


def run_list(args: argparse.Namespace) -> int:
    """List nodes."""
    nodes = ApiClient.from_args(args).get_all(
        "/v1/nodes", "nodes", provision_state=args.provision_state,
        auto_discovered="true" if args.auto_discovered else None)
    output.emit_list(args, nodes, LIST_COLUMNS)
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Show one node."""
    node = ApiClient.from_args(args).get(f"/v1/nodes/{quote(args.node)}")
    output.emit_record(args, node, SHOW_FIELDS)
    return 0


def run_create(args: argparse.Namespace) -> int:
    """Enroll a node."""
    body = {"driver": args.driver}
    for name in ("name", "uuid", "driver_info", "properties", "extra", "inspect_interface",
                 "resource_class"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    node = ApiClient.from_args(args).post("/v1/nodes", body)
    output.emit_record(args, node, SHOW_FIELDS)
    return 0


def run_state(args: argparse.Namespace) -> int:
    """inspect / abort / manage."""
    node = ApiClient.from_args(args).put(f"/v1/nodes/{quote(args.node)}/states/provision",
                                         {"target": args.target})
    if args.format == "json":
        output.print_json(node)
    else:
        print(f"Node {node['uuid']} is now {node['provision_state']!r}.")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    """Delete a node."""
    ApiClient.from_args(args).delete(f"/v1/nodes/{quote(args.node)}")
    print(f"Deleted node {args.node}.")
    return 0


def run_inventory_save(args: argparse.Namespace) -> int:
    """Save the stored inventory (the file is written only once the API answered)."""
    data = ApiClient.from_args(args).get(f"/v1/nodes/{quote(args.node)}/inventory")
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if not args.file:
        sys.stdout.write(text)
        return 0
    temporary = f"{args.file}.tmp{os.getpid()}"
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, args.file)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise CommandError(f"cannot write {args.file}: {exc.strerror or exc}") from None
    print(f"Saved the inventory of node {args.node} to {args.file}.", file=sys.stderr)
    return 0


def run_reprocess(args: argparse.Namespace) -> int:
    """Reprocess the stored inventory; print what changed."""
    result = ApiClient.from_args(args).post(
        f"/v1/nodes/{quote(args.node)}/inventory/reprocess", {})
    if args.format == "json":
        output.print_json(result)
        return 0
    changes = result.get("changes") or []
    print(f"Node {result['node']} reprocessed ({len(changes)} change(s)); it stays "
          f"{result['provision_state']!r}.")
    for change in changes:
        print(f"  {change['path']}: {json.dumps(change['old'])} -> {json.dumps(change['new'])}")
    return 0
