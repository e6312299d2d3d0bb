"""Ironic root device hints: parse a ``properties.root_device`` dict and match disks.

Hints: ``size`` (GiB; compared with the disk size in whole GiB), ``rotational`` (boolean) and
the string hints ``model, vendor, serial, wwn, wwn_with_extension, wwn_vendor_extension, name,
hctl, by_path``. A value without an operator means equality (case-insensitive for strings);
oslo.utils' operators work as in Ironic: ``>= 100``, ``<in> samsung``, ``<or> sda <or> sdb``,
``s!= x``, ``<range-in> [100 200]``. ``name`` without an operator may omit ``/dev/``.
"""

import logging
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote

from oslo_utils import specs_matcher, strutils

LOG = logging.getLogger(__name__)
GIB = 1024 ** 3
STRING_HINTS = ("model", "vendor", "serial", "wwn", "wwn_with_extension",
                "wwn_vendor_extension", "name", "hctl", "by_path")
VALID_HINTS = ("size", "rotational", *STRING_HINTS)
_GRAMMAR = specs_matcher.make_grammar()


class HintError(ValueError):
    """Root device hints that cannot be used; the message names the hint."""


def _operator(expression: str) -> str | None:
    if expression.startswith("<range-in>"):
        return "<range-in>"
    try:
        tokens = _GRAMMAR.parse_string(expression)
    except Exception:  # pyparsing's ParseException: no operator syntax at all
        return None
    return tokens[0] if len(tokens) > 1 else None


def _normalise_text(value: str) -> str:
    # Quoting makes spaces and special characters safe inside operator expressions.
    return quote(value.strip().lower())


def parse_hints(hints: Any) -> dict[str, Any]:
    """Validate hints and turn them into specs_matcher expressions (booleans stay booleans)."""
    if not isinstance(hints, dict) or not hints:
        raise HintError(f"root device hints must be a non-empty object, got {hints!r:.80}")
    unknown = sorted(set(hints) - set(VALID_HINTS))
    if unknown:
        raise HintError(f"unknown root device hint(s) {', '.join(unknown)}; valid hints: "
                        f"{', '.join(VALID_HINTS)}")
    parsed: dict[str, Any] = {}
    for name, value in hints.items():
        if name == "rotational":
            try:
                parsed[name] = strutils.bool_from_string(value, strict=True)
            except ValueError:
                raise HintError(f"root device hint rotational must be a boolean, got "
                                f"{value!r:.40}") from None
            continue
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            raise HintError(f"root device hint {name} has an invalid value {value!r:.40}")
        text = str(value).strip()
        op = _operator(text.lower())
        if name == "size":
            parsed[name] = _size_expression(text, op)
            continue
        if op is None:
            if name == "name" and not text.startswith("/dev/"):
                text = "/dev/" + text
            parsed[name] = f"s== {_normalise_text(text)}"
        else:
            values = [v for v in text.lower().split(op) if v.strip()]
            body = f" {op} ".join(_normalise_text(v) for v in values)
            parsed[name] = f"{op} {body}"
    return parsed


def _size_expression(text: str, op: str | None) -> str:
    if op == "<range-in>":
        # specs_matcher needs the brackets as separate tokens: "<range-in> [ 10 20 ]".
        body = text[len("<range-in>"):]
        for bracket in "[]()":
            body = body.replace(bracket, f" {bracket} ")
        tokens = body.split()
        if (len(tokens) != 4 or tokens[0] not in "[(" or tokens[3] not in "])"
                or not all(t.isdigit() for t in tokens[1:3])):
            raise HintError(f"root device hint size {text!r:.40} is not a range such as "
                            f"'<range-in> [100 200]'")
        return "<range-in> " + " ".join(tokens)
    if op is None:
        op, values = "==", [text]
    else:
        values = [v.strip() for v in text.split(op) if v.strip()]
    for value in values:
        try:
            number = int(value)
        except ValueError:
            raise HintError(f"root device hint size must be an integer number of GiB, got "
                            f"{text!r:.40}") from None
        if number <= 0:
            raise HintError(f"root device hint size must be positive, got {text!r:.40}")
    return f"{op} {f' {op} '.join(values)}" if op in ("<or>",) else f"{op} {values[0]}"


def _disk_value(disk: dict, name: str) -> Any:
    value = disk.get(name)
    if name == "size":
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        return value // GIB
    if name == "rotational":
        if isinstance(value, bool):
            return value
        try:
            return strutils.bool_from_string(value, strict=True)
        except (ValueError, TypeError):
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    return _normalise_text(value)


def find_devices(disks: Iterable[dict], hints: dict[str, Any]) -> Iterator[dict]:
    """Disks matching every hint (hints as given by the operator)."""
    parsed = parse_hints(hints)
    for disk in disks:
        for name, expected in parsed.items():
            actual = _disk_value(disk, name)
            if actual is None:
                break
            if name == "rotational":
                if actual != expected:
                    break
                continue
            try:
                if not specs_matcher.match(str(actual), expected):
                    break
            except (TypeError, ValueError) as exc:
                raise HintError(f"root device hint {name}={hints[name]!r} cannot be "
                                f"evaluated: {exc}") from None
        else:
            yield disk


def match_root_device(disks: list[dict], hints: dict[str, Any]) -> dict | None:
    """The first disk matching all hints, or None."""
    return next(find_devices(disks, hints), None)
