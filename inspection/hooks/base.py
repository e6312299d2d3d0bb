"""Inspection hooks: the base class, their errors, the loader and the runner.

A hook is a class registered in the ``inspection.hooks`` entry point group under its name
(``validate-interfaces``...). ``load_hooks(conf)`` instantiates the hooks listed in
``[inspector]hooks`` in that order, after checking that every name exists and that every
hook's ``dependencies`` are listed before it. The pipeline then calls
``run_preprocess(hooks, ctx)`` and later ``run_hooks(hooks, ctx)``; both raise
:class:`InspectionHookError` (never a bare KeyError/TypeError) and never commit.
"""

import abc
import logging
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import ClassVar

import sqlalchemy.exc
from oslo_config import cfg

from inspection.common.capabilities import CapabilitiesError
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "inspection.hooks"


class InspectionHookError(Exception):
    """A hook refused the inspection data; the message says why (it becomes last_error)."""

    def __init__(self, message: str, hook: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hook = hook

    def __str__(self) -> str:
        return f"{self.hook} hook: {self.message}" if self.hook else self.message


class InvalidInventoryError(InspectionHookError):
    """The inventory or plugin data is missing something the hook needs, or is malformed."""


class RamdiskError(InspectionHookError):
    """The ramdisk itself reported a failure; the message is the ramdisk's."""

    def __str__(self) -> str:
        return self.message


class HookConfigError(Exception):
    """The hook configuration is unusable (unknown hook, missing dependency, bad option)."""


class InspectionHook(metaclass=abc.ABCMeta):
    """Base class of inspection hooks.

    Hooks are built once per process with the configuration (so they validate their options
    at start) and then called for each inspection with an :class:`InspectionContext`. They
    may change ``ctx.plugin_data`` and, through ``ctx``, the node and its ports; they must not
    change ``ctx.inventory`` and must never commit.
    """

    #: The entry point name; the loader sets it on each instance from the configured name.
    name: ClassVar[str] = ""
    #: Names of hooks that must be listed before this one in ``[inspector]hooks``.
    dependencies: ClassVar[tuple[str, ...]] = ()

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    def preprocess(self, ctx: InspectionContext) -> None:  # noqa: B027 - optional phase
        """Run before the preprocess rules: validate and enrich plugin_data, change nothing."""

    @abc.abstractmethod
    def __call__(self, ctx: InspectionContext) -> None:
        """Run after the preprocess rules: update the node and its ports."""

    def fail(self, message: str) -> InvalidInventoryError:
        """An :class:`InvalidInventoryError` naming this hook, for ``raise self.fail(...)``."""
        return InvalidInventoryError(message, hook=self.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def available_hooks() -> dict[str, EntryPoint]:
    """Hook entry points by name (the first registration of a name wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def configured_hook_names(conf: cfg.ConfigOpts) -> list[str]:
    """The names in ``[inspector]hooks`` with ``$default_hooks`` expanded, in order."""
    try:
        raw = conf.inspector.hooks
        defaults = conf.inspector.default_hooks
    except (cfg.Error, KeyError, ValueError) as exc:
        # set_override() values are interpolated against [DEFAULT], so $default_hooks fails
        # there while it works in configuration files.
        raise HookConfigError(f"cannot read [inspector]hooks: {exc} (outside a configuration "
                              f"file, write $inspector.default_hooks)") from None
    return expand_hook_names(raw or "", defaults or "")


def expand_hook_names(value: str, default_hooks: str) -> list[str]:
    """Split a comma-separated hook list, expanding a literal ``$default_hooks`` item."""
    names: list[str] = []
    for raw_item in value.split(","):
        item = raw_item.strip()
        if item in ("$default_hooks", "${default_hooks}"):
            names.extend(n.strip() for n in default_hooks.split(",") if n.strip())
        elif item:
            names.append(item)
    return names


def load_hooks(conf: cfg.ConfigOpts, names: Sequence[str] | None = None) -> list[InspectionHook]:
    """Instantiate the configured hooks in order, or raise :class:`HookConfigError`."""
    names = configured_hook_names(conf) if names is None else list(names)
    available = available_hooks()
    seen: set[str] = set()
    hooks: list[InspectionHook] = []
    for name in names:
        if name in seen:
            raise HookConfigError(f"inspection hook {name!r} is listed twice in "
                                  f"[inspector]hooks (note that $default_hooks already "
                                  f"includes {conf.inspector.default_hooks})")
        if name not in available:
            raise HookConfigError(f"unknown inspection hook {name!r} in [inspector]hooks; "
                                  f"available hooks: {', '.join(sorted(available))}")
        hook_cls = _load_class(available[name])
        for dependency in hook_cls.dependencies:
            if dependency not in seen:
                raise HookConfigError(
                    f"inspection hook {name!r} depends on {dependency!r}, which must be "
                    f"listed before it in [inspector]hooks (configured order: "
                    f"{','.join(names)})")
        try:
            hook = hook_cls(conf)
        except HookConfigError as exc:
            raise HookConfigError(f"inspection hook {name!r}: {exc}") from None
        hook.name = name
        hooks.append(hook)
        seen.add(name)
    LOG.debug("Inspection hooks enabled: %s", ", ".join(names))
    return hooks


def _load_class(ep: EntryPoint) -> type[InspectionHook]:
    try:
        hook_cls = ep.load()
    except Exception as exc:  # any import failure of a plugin is a configuration problem
        raise HookConfigError(f"cannot load inspection hook {ep.name!r} ({ep.value}): "
                              f"{exc}") from None
    if not (isinstance(hook_cls, type) and issubclass(hook_cls, InspectionHook)):
        raise HookConfigError(f"inspection hook {ep.name!r} ({ep.value}) is not an "
                              f"InspectionHook subclass")
    return hook_cls


def run_preprocess(hooks: Sequence[InspectionHook], ctx: InspectionContext) -> None:
    """Run every hook's ``preprocess`` in order."""
    for hook in hooks:
        _run(hook, "preprocess", hook.preprocess, ctx)


def run_hooks(hooks: Sequence[InspectionHook], ctx: InspectionContext) -> None:
    """Run every hook's main phase (``__call__``) in order."""
    for hook in hooks:
        _run(hook, "main", hook, ctx)


def _run(hook: InspectionHook, phase: str, func, ctx: InspectionContext) -> None:
    LOG.debug("Running %s phase of hook %s for node %s", phase, hook.name, ctx.node_ident)
    try:
        func(ctx)
    except InspectionHookError as exc:
        if exc.hook is None and not isinstance(exc, RamdiskError):
            exc.hook = hook.name
        raise
    except CapabilitiesError as exc:
        raise InspectionHookError(f"cannot update the node's capabilities: {exc}",
                                  hook=hook.name) from None
    except sqlalchemy.exc.SQLAlchemyError:
        raise  # a database failure is the pipeline's to report, not the data's fault
    except Exception as exc:
        # A hook bug or data shape nobody anticipated: report it cleanly, keep the traceback
        # in the log for whoever fixes it.
        LOG.exception("Hook %s failed unexpectedly for node %s", hook.name, ctx.node_ident)
        raise InspectionHookError(f"unexpected error in the {phase} phase: "
                                  f"{type(exc).__name__}: {exc}", hook=hook.name) from exc
