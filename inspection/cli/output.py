"""Printing results: aligned tables for people, JSON for scripts."""

import json
import sys
from collections.abc import Sequence
from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return " ".join(str(value).split())


def print_json(data: Any) -> None:
    """Pretty JSON on stdout."""
    json.dump(data, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def print_table(rows: Sequence[dict], columns: Sequence[str]) -> None:
    """An aligned table with a header line; nothing but the header for no rows."""
    cells = [[_cell(row.get(col)) for col in columns] for row in rows]
    headers = [col.replace("_", " ").title() for col in columns]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    print(line)
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print(line)
    for row in cells:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    if cells:
        print(line)


def print_record(record: dict, fields: Sequence[str] | None = None) -> None:
    """One object as a Field/Value table."""
    keys = list(fields) if fields else sorted(record)
    print_table([{"field": k, "value": record.get(k)} for k in keys], ["field", "value"])


def emit_list(args, rows: list[dict], columns: Sequence[str]) -> None:
    """A list in the format asked for (``-f``)."""
    if args.format == "json":
        print_json(rows)
    else:
        print_table(rows, columns)


def emit_record(args, record: dict, fields: Sequence[str] | None = None) -> None:
    """One object in the format asked for (``-f``)."""
    if args.format == "json":
        print_json(record)
    else:
        print_record(record, fields)
