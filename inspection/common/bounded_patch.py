"""RFC 6902 patches applied with a bound on the size of the result, checked before each
operation grows the document: 20 ``copy`` operations of a 1 kB request would otherwise double
a field 20 times (125 MB) before anything could look at it."""

import copy
import json
from typing import Any

import jsonpatch
import jsonpointer


class PatchTooLarge(ValueError):
    """The patched document would be larger than allowed."""


def _size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def _replaced(document: Any, operation: dict) -> int:
    """Bytes of the value an add/replace operation overwrites (0 if it adds)."""
    path = operation.get("path")
    if not isinstance(path, str) or not path:
        return 0
    parent, _, key = path.rpartition("/")
    try:
        container = jsonpointer.resolve_pointer(document, parent)
    except jsonpointer.JsonPointerException:
        return 0
    key = key.replace("~1", "/").replace("~0", "~")
    if isinstance(container, dict) and key in container:
        return _size(container[key]) + len(json.dumps(key)) + 2  # with '"key": '
    if isinstance(container, list) and operation["op"] == "replace" and key.isdigit() \
            and int(key) < len(container):
        return _size(container[int(key)])
    return 0


def apply_bounded(document: Any, operations: list, max_size: int, what: str = "document",
                  option: str | None = None) -> Any:
    """``document`` (unchanged) patched with ``operations``; :class:`PatchTooLarge` as soon as
    an operation would take the result over ``max_size`` bytes of JSON (or over the
    document's own size, if already larger). jsonpatch's errors pass through."""
    result = copy.deepcopy(document)
    budget = max(max_size, _size(result))
    upper = _size(result)  # an upper bound of the result's size: removals are not counted
    for operation in operations:
        kind = operation.get("op") if isinstance(operation, dict) else None
        growth = 0
        if kind in ("add", "replace") and "value" in operation:
            growth = _size(operation["value"]) - _replaced(result, operation)
        elif kind == "copy" and isinstance(operation.get("from"), str):
            growth = _size(jsonpointer.resolve_pointer(result, operation["from"]))
        if upper + growth > budget:
            upper = _size(result) + growth  # the exact size, only when the bound is close
            if upper > budget:
                limit = f"{option} = {max_size}" if option else str(max_size)
                raise PatchTooLarge(f"the patched {what} would take more than {limit} "
                                    f"bytes of JSON")
        else:
            upper += growth
        result = jsonpatch.JsonPatch([operation]).apply(result, in_place=True)
    return result
