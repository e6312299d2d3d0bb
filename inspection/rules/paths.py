"""Paths into JSON-like data (``/driver_info/ipmi_address``, ``driver_info/x``, ``a.b``)."""

import contextlib
import copy
import re
from typing import Any

from inspection.rules.errors import ActionError

#: A path written as a reference, ``{{ /properties/x }}`` (``{ ... }`` once templated).
_WRAPPED = re.compile(r"\{\{?\s*([^{}]*?)\s*\}\}?")


def split_path(path: object, *, allow_dots: bool = True) -> list[str]:
    """Split a path into segments, raising :class:`ActionError` if invalid.

    As Ironic reads paths: slashes separate segments (a leading one is optional), else dots
    do (``a.b.c``, unless ``allow_dots`` is false); ``{{ /a/b }}`` is the path ``/a/b``.
    """
    if isinstance(path, str) and (wrapped := _WRAPPED.fullmatch(path.strip())):
        path = wrapped.group(1)
    if not isinstance(path, str) or not path.strip("/"):
        raise ActionError("path must be a non-empty string such as '/extra/key'")
    if "/" in path or not allow_dots:
        parts = path.strip("/").split("/")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in parts]
    else:
        parts = path.split(".")
    if any(not p for p in parts):
        raise ActionError(f"path {path!r} has an empty segment")
    return parts


def _step(container: Any, key: str, create: bool) -> Any:
    if isinstance(container, dict):
        if key not in container or container[key] is None:
            if not create:
                raise KeyError(key)
            container[key] = {}
        return container[key]
    if isinstance(container, list):
        try:
            return container[int(key)]
        except (ValueError, IndexError):
            raise KeyError(key) from None
    raise ActionError(f"cannot descend into {key!r}: not an object or a list")


def get_in(data: Any, parts: list[str], default: Any = None) -> Any:
    """The value at ``parts`` in ``data``, or ``default`` when any segment is missing."""
    try:
        for key in parts:
            data = _step(data, key, create=False)
    except (KeyError, ActionError):
        return default
    return data


def set_in(data: Any, parts: list[str], value: Any) -> None:
    """Set ``value`` at ``parts``, creating intermediate objects."""
    for key in parts[:-1]:
        try:
            data = _step(data, key, create=True)
        except KeyError:
            raise ActionError(f"no list element {key!r}") from None
    last = parts[-1]
    if isinstance(data, dict):
        data[last] = value
    elif isinstance(data, list):
        try:
            data[int(last)] = value
        except (ValueError, IndexError):
            raise ActionError(f"no list element {last!r}") from None
    else:
        raise ActionError(f"cannot set {last!r}: parent is not an object or a list")


def extend_in(data: Any, parts: list[str], value: Any, unique: bool) -> None:
    """Append ``value`` to the list at ``parts`` (created when missing)."""
    current = get_in(data, parts)
    if current is None:
        current = []
        set_in(data, parts, current)
    if not isinstance(current, list):
        raise ActionError(f"cannot extend {'/'.join(parts)!r}: it is not a list")
    if not (unique and value in current):
        current.append(value)


def delete_in(data: Any, parts: list[str]) -> None:
    """Remove the value at ``parts``; a missing value is not an error."""
    parent = get_in(data, parts[:-1]) if len(parts) > 1 else data
    if isinstance(parent, dict):
        parent.pop(parts[-1], None)
    elif isinstance(parent, list):
        with contextlib.suppress(ValueError, IndexError):
            del parent[int(parts[-1])]


def copied_along(data: Any, parts: list[str]) -> Any:
    """A copy of ``data`` in which every container on ``parts`` is fresh, the rest shared.

    Enough for an in-place edit at ``parts`` to leave ``data`` untouched, at the cost of the
    path rather than of the whole value (a node's ``extra`` grows with every rule that writes).
    """
    top = _shallow(data)
    node = top
    for key in parts:
        if isinstance(node, dict):
            child = node.get(key)
        elif isinstance(node, list):
            try:
                index = int(key)
                child = node[index]
            except (ValueError, IndexError):
                break
        else:
            break
        if not isinstance(child, (dict, list)):
            break
        child = _shallow(child)
        if isinstance(node, dict):
            node[key] = child
        else:
            node[index] = child
        node = child
    return top


def _shallow(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


def copied(value: Any) -> Any:
    """A deep copy of JSON-like data, so stored values never alias rule or inventory data."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return copy.deepcopy(value)
