"""What rules (and hooks) changed on a node: ``{"path", "old", "new"}`` per changed value.

A *view* holds everything a person would see change: the node's writable fields, its
traits, its ports by MAC and the plugin data. Paths are JSON pointers into that view
(``/properties/capabilities``, ``/ports/aa:bb:cc:dd:ee:ff/physical_network``,
``/plugin_data/...``, ``/traits``); lists are compared whole. Secrets never show: a value
under a secret-named key, or a password in a URL, reads ``***``.
"""

from typing import Any

from inspection.rules.adapters import PORT_READ_FIELDS, WRITE_FIELDS, NodeAdapter
from inspection.rules.masking import MASK, is_secret_key, masked

_PORT_FIELDS = tuple(f for f in PORT_READ_FIELDS if f not in ("uuid", "address"))
_MISSING = object()


def view(node: NodeAdapter, plugin_data: dict | None = None) -> dict[str, Any]:
    """What can change about ``node`` (a deep copy), with ``plugin_data`` if given."""
    exported = node.export()
    data: dict[str, Any] = {name: exported["node"].get(name) for name in WRITE_FIELDS}
    data["traits"] = sorted(exported["traits"])
    data["ports"] = {str(p.get("address")): {f: p.get(f) for f in _PORT_FIELDS}
                     for p in exported["ports"]}
    if plugin_data is not None:
        data["plugin_data"] = plugin_data
    return data


def _escape(key: object) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _shown(value: Any, secret: bool, hide_values: bool) -> Any:
    if value is _MISSING:
        return None
    if hide_values or (secret and value not in (None, "")):
        return MASK
    return masked(value)


def diff(before: Any, after: Any, *, hide_values: bool = False) -> list[dict[str, Any]]:
    """The changed leaves between two views, in path order. ``hide_values``: every old and
    new value reads ``***`` (a sensitive rule's effects)."""
    changes: list[dict[str, Any]] = []
    _walk(before, after, "", False, (hide_values, changes))
    return changes


def _walk(old: Any, new: Any, path: str, secret: bool, how: tuple[bool, list]) -> None:
    hide, out = how
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            _walk(old.get(key, _MISSING), new.get(key, _MISSING), f"{path}/{_escape(key)}",
                  secret or is_secret_key(key), how)
        return
    if old is _MISSING and new is _MISSING:
        return
    if old is not _MISSING and new is not _MISSING and old == new \
            and type(old) is type(new):
        return
    out.append({"path": path or "/", "old": _shown(old, secret, hide),
                "new": _shown(new, secret, hide)})
