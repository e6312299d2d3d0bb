"""Built-in actions and the registry that adds plugins from the ``inspection.rules.actions``
entry point group.

An action is a callable ``action(ctx: ActionContext, <arguments>)``: its signature (after the
context) declares its arguments, positional ones map from list ``args`` and every one from dict
``args``. Attributes: ``supports_early`` (runs without a node), ``literal`` (arguments not
interpolated), ``masked_args`` (always interpolated with secrets masked, because the result is
shown to people), ``checks`` (argument -> validator of a literal value).
"""

import functools
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from inspection.common.untrusted import for_log
from inspection.rules import paths
from inspection.rules.adapters import PORT_WRITE_FIELDS, WRITE_FIELDS, NodeAdapter
from inspection.rules.errors import ActionError, InspectionFailed

LOG = logging.getLogger("inspection.rules")
ENTRY_POINT_GROUP = "inspection.rules.actions"
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
              "error": logging.ERROR, "critical": logging.CRITICAL}


@dataclass
class ActionContext:
    """What an action may touch: the node (None in the early phase) and the data."""

    node: NodeAdapter | None
    inventory: dict
    plugin_data: dict
    rule_uuid: str | None = None
    sensitive: bool = False
    log: logging.Logger = field(default=LOG)

    def require_node(self) -> NodeAdapter:
        """The node, or an error when the action runs in the early phase."""
        if self.node is None:
            raise ActionError("this action needs a node and cannot run in the early phase")
        return self.node


def _check_path(value: Any, writable: dict | None, allow_dots: bool = True) -> str | None:
    try:
        parts = paths.split_path(value, allow_dots=allow_dots)
    except ActionError as exc:
        return str(exc)
    if writable is not None and parts[0] not in writable:
        return f"{parts[0]!r} cannot be changed by rules; allowed: {', '.join(writable)}"
    return None


def _check_level(value: Any) -> str | None:
    if isinstance(value, str) and value in LOG_LEVELS:  # a list or dict is unhashable
        return None
    return f"must be one of {', '.join(LOG_LEVELS)}"


def _check_bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def action(*, early: bool = False, masked: tuple[str, ...] = (), literal: tuple[str, ...] = (),
           **checks: Callable[[Any], str | None]):
    """Decorator declaring an action's early-phase support and argument metadata."""
    def wrap(func):
        func.supports_early = early
        func.masked_args = masked
        func.literal = literal
        func.checks = checks
        return func
    return wrap


_NODE_PATH = functools.partial(_check_path, writable=WRITE_FIELDS)
_PORT_PATH = functools.partial(_check_path, writable=PORT_WRITE_FIELDS)
_DATA_PATH = functools.partial(_check_path, writable=None, allow_dots=True)


@action(early=True, masked=("msg",))
def fail(ctx: ActionContext, msg):
    """Fail inspection with the given message."""
    raise InspectionFailed(str(msg))


@action(early=True, masked=("msg",), level=_check_level)
def log(ctx: ActionContext, msg, level="info"):
    """Write the message to the service log."""
    ctx.log.log(LOG_LEVELS.get(str(level).lower(), logging.INFO), "rule %s: %s",
                ctx.rule_uuid, for_log(msg))


@action(early=True, path=_DATA_PATH)
def set_plugin_data(ctx: ActionContext, path, value):
    """Set a value in the plugin data."""
    paths.set_in(ctx.plugin_data, paths.split_path(path, allow_dots=True), paths.copied(value))


@action(early=True, path=_DATA_PATH, unique=_check_bool)
def extend_plugin_data(ctx: ActionContext, path, value, *, unique=False):
    """Append to a list in the plugin data (unique: only if not there yet)."""
    paths.extend_in(ctx.plugin_data, paths.split_path(path, allow_dots=True),
                    paths.copied(value), bool(unique))


@action(early=True, path=_DATA_PATH)
def unset_plugin_data(ctx: ActionContext, path):
    """Remove a value from the plugin data (missing is fine)."""
    paths.delete_in(ctx.plugin_data, paths.split_path(path, allow_dots=True))


@action(path=_NODE_PATH)
def set_attribute(ctx: ActionContext, path, value):
    """Set a node attribute by JSON-patch path, e.g. /driver_info/ipmi_address."""
    ctx.require_node().set(path, value)


@action(path=_NODE_PATH, unique=_check_bool)
def extend_attribute(ctx: ActionContext, path, value, *, unique=False):
    """Append to a list node attribute."""
    ctx.require_node().extend(path, value, bool(unique))


@action(path=_NODE_PATH)
def del_attribute(ctx: ActionContext, path):
    """Remove a node attribute; a missing sub-field is not an error."""
    ctx.require_node().delete(path)


@action(path=_PORT_PATH)
def set_port_attribute(ctx: ActionContext, port_id, path, value):
    """Set an attribute of the port with this MAC or UUID."""
    ctx.require_node().port_set(port_id, path, value)


@action(path=_PORT_PATH, unique=_check_bool)
def extend_port_attribute(ctx: ActionContext, port_id, path, value, *, unique=False):
    """Append to a list attribute of the port with this MAC or UUID."""
    ctx.require_node().port_extend(port_id, path, value, bool(unique))


@action(path=_PORT_PATH)
def del_port_attribute(ctx: ActionContext, port_id, path):
    """Remove an attribute of the port with this MAC or UUID."""
    ctx.require_node().port_delete(port_id, path)


@action()
def set_capability(ctx: ActionContext, name, value):
    """Set a capability in properties['capabilities'], replacing an existing one."""
    ctx.require_node().set_capability(name, value)


@action()
def unset_capability(ctx: ActionContext, name):
    """Remove a capability."""
    ctx.require_node().unset_capability(name)


@action()
def add_trait(ctx: ActionContext, name):
    """Add a trait to the node."""
    ctx.require_node().add_trait(name)


@action()
def remove_trait(ctx: ActionContext, name):
    """Remove a trait from the node."""
    ctx.require_node().remove_trait(name)


BUILT_IN_ACTIONS: dict[str, Callable] = {
    "fail": fail, "log": log, "set-plugin-data": set_plugin_data,
    "extend-plugin-data": extend_plugin_data, "unset-plugin-data": unset_plugin_data,
    "set-attribute": set_attribute, "extend-attribute": extend_attribute,
    "del-attribute": del_attribute, "set-port-attribute": set_port_attribute,
    "extend-port-attribute": extend_port_attribute, "del-port-attribute": del_port_attribute,
    "set-capability": set_capability, "unset-capability": unset_capability,
    "add-trait": add_trait, "remove-trait": remove_trait,
}


def parameters(func: Callable, skip_context: bool) -> list[inspect.Parameter]:
    """The declared arguments of a condition or action (without the context)."""
    params = list(inspect.signature(func).parameters.values())
    return params[1:] if skip_context else params


class ActionRegistry:
    """Action name -> callable: the built-ins plus plugins found by entry point."""

    def __init__(self, extra: dict[str, Callable] | None = None,
                 discover: bool = True) -> None:
        self.actions: dict[str, Callable] = dict(BUILT_IN_ACTIONS)
        self.load_failures: dict[str, str] = {}
        if discover:
            self._discover()
        for name, func in (extra or {}).items():
            self.actions[name] = func

    def _discover(self) -> None:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in BUILT_IN_ACTIONS:
                continue  # built-ins are registered directly; a plugin cannot replace them
            try:
                obj = ep.load()
                func = obj() if inspect.isclass(obj) else obj
                if not callable(func):
                    raise TypeError("not callable")
                inspect.signature(func)
            except Exception as exc:  # a broken plugin must not stop the service
                LOG.error("cannot load inspection rule action %s (%s): %s",
                          ep.name, ep.value, exc)
                self.load_failures[ep.name] = f"{type(exc).__name__}: {exc}"
                continue
            self.actions[ep.name] = func

    def get(self, name: str) -> Callable | None:
        """The action called ``name``, or None."""
        return self.actions.get(name)

    def supports_early(self, name: str) -> bool:
        """Whether action ``name`` may run in the early phase."""
        return bool(getattr(self.actions.get(name), "supports_early", False))


@functools.cache
def default_registry() -> ActionRegistry:
    """The process-wide registry (entry points are read once)."""
    return ActionRegistry()
