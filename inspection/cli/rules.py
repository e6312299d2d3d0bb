"""``ironic-inspection rule ...``: inspection rules through the API."""

import argparse
import json
from typing import Any
from urllib.parse import urlsplit

import yaml

from inspection.cli import output
from inspection.cli.errors import CommandError, UsageError
from inspection.cli.http import ApiClient, add_api_options, quote

BASE = "/v1/inspection_rules"
LIST_COLUMNS = ("uuid", "priority", "phase", "scope", "sensitive", "built_in", "description")
LONG_COLUMNS = (*LIST_COLUMNS, "conditions", "actions")
TEST_COLUMNS = ("node", "matched", "changes", "error")
EXPLAIN_COLUMNS = ("uuid", "phase", "priority", "description", "would_run", "outcome",
                   "message")


def _json_arg(option: str):
    def parse(text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{option} is not valid JSON: {exc}") from None
    return parse


def _add_fields(parser: argparse.ArgumentParser, creating: bool) -> None:
    parser.add_argument("--actions", type=_json_arg("--actions"), required=creating,
                        metavar="JSON", help="JSON list of actions")
    parser.add_argument("--conditions", type=_json_arg("--conditions"), metavar="JSON",
                        help="JSON list of conditions")
    parser.add_argument("--sensitive", action="store_true", default=None,
                        help="mark the rule sensitive (irreversible: its conditions and "
                             "actions are never shown again)")
    parser.add_argument("--scope", help="run only for nodes with this inspection scope")
    parser.add_argument("--phase", choices=["early", "preprocess", "main"],
                        help="phase the rule runs in (default main)")
    parser.add_argument("--priority", type=int, help="0-9999; higher runs first")
    parser.add_argument("--description", help="free text")


def add_commands(sub, parent: argparse.ArgumentParser) -> None:
    """Register ``rule`` and its sub-commands."""
    rule = sub.add_parser("rule", help="manage inspection rules")
    rsub = rule.add_subparsers(dest="rule_command", metavar="COMMAND", required=True)

    def command(name: str, func, help_text: str, **kw) -> argparse.ArgumentParser:
        parser = rsub.add_parser(name, help=help_text, description=help_text, **kw)
        add_api_options(parser)
        parser.set_defaults(func=func)
        return parser

    p = command("import", run_import, "create the rules of a YAML or JSON file (one rule "
                "or a list); stops nothing on a bad rule: the others are still created, "
                "and the exit status is 1")
    p.add_argument("file", metavar="FILE")
    p = command("list", run_list, "list built-in and stored rules in run order")
    p.add_argument("--long", action="store_true", help="show conditions and actions too")
    p.add_argument("--scope", help="only rules of this scope")
    p.add_argument("--phase", choices=["early", "preprocess", "main"],
                   help="only rules of this phase")
    p = command("show", run_show, "show one rule")
    p.add_argument("rule_id", metavar="ID")
    p = command("create", run_create, "create a rule")
    p.add_argument("--uuid", help="UUID of the new rule (default: generated)")
    _add_fields(p, creating=True)
    p = command("set", run_set, "change fields of a rule (JSON patch)")
    p.add_argument("rule_id", metavar="ID")
    _add_fields(p, creating=False)
    p = command("unset", run_unset, "remove optional fields of a rule (JSON patch)")
    p.add_argument("rule_id", metavar="ID")
    for field in ("description", "scope", "conditions"):
        p.add_argument(f"--{field}", action="store_true", help=f"remove the {field}")
    p = command("delete", run_delete, "delete rules (built-in rules cannot be deleted)")
    p.add_argument("rule_ids", metavar="ID", nargs="*")
    p.add_argument("--all", action="store_true", help="delete every stored rule")
    p = command("explain", run_explain, "what the rules would do for a node's stored "
                "inventory (changes nothing)")
    p.add_argument("node", metavar="NODE")
    p.add_argument("--phase", choices=["early", "preprocess", "main"],
                   help="explain one phase only")
    p = command("test", run_test, "try the rules of a YAML or JSON file on nodes' stored "
                "inspection data: which nodes they match and what they would change "
                "(writes nothing)")
    p.add_argument("file", metavar="RULE_FILE", help="one rule or a list, as for import")
    p.add_argument("--node", dest="nodes", action="append", metavar="NODE",
                   help="UUID or name; repeat for several (default: every node with "
                        "stored inspection data)")


def _load_file(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        # YAML is a superset of JSON: one parser reads both.
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CommandError(f"{path} is not valid YAML or JSON{where}: "
                           f"{getattr(exc, 'problem', None) or exc}") from None
    rules = doc if isinstance(doc, list) else [doc]
    if not rules or not all(isinstance(r, dict) for r in rules):
        raise CommandError(f"{path} must hold one rule (a mapping) or a list of rules")
    return rules


def run_import(args: argparse.Namespace) -> int:
    """Create each rule of the file; report every failure."""
    rules = _load_file(args.file)
    client = ApiClient.from_args(args)
    created, failures = [], []
    for index, doc in enumerate(rules, 1):
        try:
            created.append(client.post(BASE, doc))
        except CommandError as exc:
            label = doc.get("description") or doc.get("uuid") or ""
            failures.append(f"rule {index}{f' ({label})' if label else ''}: {exc}")
    if args.format == "json":
        output.print_json(created)
    else:
        output.print_table(created, LIST_COLUMNS)
    if failures:
        raise CommandError(f"{len(failures)} of {len(rules)} rule(s) not imported: "
                           + " | ".join(failures))
    return 0


def run_list(args: argparse.Namespace) -> int:
    """List rules."""
    client = ApiClient.from_args(args)
    rules = client.get_all(BASE, "inspection_rules", detail="true" if args.long else None,
                           scope=args.scope, phase=args.phase)
    output.emit_list(args, rules, LONG_COLUMNS if args.long else LIST_COLUMNS)
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Show one rule."""
    rule = ApiClient.from_args(args).get(f"{BASE}/{quote(args.rule_id)}")
    output.emit_record(args, rule)
    return 0


def _fields(args: argparse.Namespace) -> dict:
    names = ("actions", "conditions", "sensitive", "scope", "phase", "priority",
             "description")
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def run_create(args: argparse.Namespace) -> int:
    """Create one rule."""
    body = _fields(args)
    if args.uuid:
        body["uuid"] = args.uuid
    rule = ApiClient.from_args(args).post(BASE, body)
    output.emit_record(args, rule)
    return 0


def run_set(args: argparse.Namespace) -> int:
    """PATCH ``add`` (add replaces an existing member, RFC 6902) for each given field."""
    fields = _fields(args)
    if not fields:
        raise UsageError("nothing to change: give at least one field option")
    patch = [{"op": "add", "path": f"/{k}", "value": v} for k, v in fields.items()]
    rule = ApiClient.from_args(args).patch(f"{BASE}/{quote(args.rule_id)}", patch)
    output.emit_record(args, rule)
    return 0


def run_unset(args: argparse.Namespace) -> int:
    """PATCH ``remove`` for each given field."""
    names = [n for n in ("description", "scope", "conditions") if getattr(args, n)]
    if not names:
        raise UsageError("nothing to unset: give --description, --scope or --conditions")
    patch = [{"op": "remove", "path": f"/{n}"} for n in names]
    rule = ApiClient.from_args(args).patch(f"{BASE}/{quote(args.rule_id)}", patch)
    output.emit_record(args, rule)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    """Delete the given rules, or all stored ones."""
    if args.all == bool(args.rule_ids):
        raise UsageError("give rule IDs or --all (not both)")
    client = ApiClient.from_args(args)
    if args.all:
        client.delete(BASE)
        print("Deleted every stored rule (built-in rules stay).")
        return 0
    failures = []
    for rule_id in args.rule_ids:
        try:
            client.delete(f"{BASE}/{quote(rule_id)}")
            print(f"Deleted rule {rule_id}.")
        except CommandError as exc:
            failures.append(f"{rule_id}: {exc}")
    if failures:
        raise CommandError("; ".join(failures))
    return 0


def run_explain(args: argparse.Namespace) -> int:
    """Explain the rules for a node."""
    body = {"node": args.node}
    if args.phase:
        body["phase"] = args.phase
    report = ApiClient.from_args(args).post(f"{BASE}/explain", body)
    if args.format == "json":
        output.print_json(report)
        return 0
    runs = report.get("rules_run_for_node")
    print(f"Node {report.get('node')}: rules "
          f"{'run' if runs or runs is None else 'do NOT run'} for its inspect interface")
    output.print_table(report.get("rules") or [], EXPLAIN_COLUMNS)
    return 0


def _change_lines(row: dict) -> str:
    return "; ".join(f"{c['path']}: {json.dumps(c['old'])} -> {json.dumps(c['new'])}"
                     for c in row.get("changes") or [])


def run_test(args: argparse.Namespace) -> int:
    """Try the file's rules on stored data; one row per node."""
    body: dict = {"rules": _load_file(args.file)}
    if args.nodes:
        body["nodes"] = args.nodes
    client = ApiClient.from_args(args)
    page = client.post(f"{BASE}/test", body)
    rows = list(page["results"])
    while page.get("next"):
        # The link is absolute as the server sees itself; keep our own base URL.
        link = urlsplit(page["next"])
        page = client.request("POST", f"{link.path}?{link.query}", body=body)
        rows.extend(page["results"])
    if args.format == "json":
        output.print_json(rows)
        return 0
    output.print_table([{**row, "changes": _change_lines(row), "error": row.get("error")}
                        for row in rows], TEST_COLUMNS)
    matched = sum(1 for row in rows if row.get("matched"))
    print(f"{matched} of {len(rows)} node(s) matched; nothing was changed.")
    return 0
