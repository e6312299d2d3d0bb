"""Misspelled options and sections are named at start instead of being silently ignored.

oslo.config ignores what it does not know. Each service checks, once its files are read, the
sections it owns (those of its own ``oslo.config.opts`` namespace) for option names no service
of the project reads, and every section for a name nobody reads, with the closest known name.
A file shared by several services (``shared.conf``) is judged against every service's options,
so one service never flags another's.
"""

import difflib
import glob
import logging
import os
from collections.abc import Collection, Iterable
from importlib import metadata

from oslo_config import cfg

from pxe_filter.common import messaging

#: The ``oslo.config.opts`` namespaces whose option names are checked: the project's
#: services' and the libraries whose options they read in their own sections ([DEFAULT]).
PROJECT_NAMESPACES = ("ironic-pxe-filter", "ironic-inspection", "oslo.log", "oslo.messaging")
#: Sections of the other libraries the inspection service reads (keystonemiddleware,
#: oslo.policy, oslo.middleware): known by name only, their options are theirs to check.
#: Loading those libraries would cost the filter seconds at start and a filter-only install
#: lacks them (tests/unit/test_unknown_options.py keeps this list complete).
LIBRARY_SECTIONS = frozenset({"keystone_authtoken", "oslo_policy", "cors", "oslo_middleware",
                              "healthcheck"})


def namespace_options(namespaces: Collection[str]) -> dict[str, list[cfg.Opt]]:
    """Options by section of every namespace that loads (an uninstalled one is skipped)."""
    found: dict[str, list[cfg.Opt]] = {}
    messaging.oslo_messaging_module()  # oslo.messaging's listing must not choose eventlet
    for point in metadata.entry_points(group="oslo.config.opts"):
        if point.name not in namespaces:
            continue
        try:
            groups = point.load()()
        except ImportError:
            continue
        for group, opts in groups:
            key = getattr(group, "name", group) or "DEFAULT"
            found.setdefault(key, []).extend(opts)
    return found


def _names(opts: Iterable[cfg.Opt], group: str) -> set[str]:
    """The options' names in ``group``, with their deprecated names there."""
    return {opt.dest for opt in opts} | {old.name.replace("-", "_") for opt in opts
                                         for old in opt.deprecated_opts
                                         if old.name and old.group in (None, group)}


def config_files(conf: cfg.ConfigOpts) -> list[str]:
    """The files ``conf`` was loaded from: --config-file ones, then each --config-dir's."""
    files = list(conf.config_file or [])
    for directory in conf.config_dir or []:  # a list in every oslo.config >= 9.0
        files += sorted(glob.glob(os.path.join(directory, "*.conf")))
    return files


def _closest(name: str, candidates: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean {match[0]}?)" if match else ""


def warn_unknown_options(conf: cfg.ConfigOpts, log: logging.Logger, own_namespace: str,
                         namespaces: Collection[str] = PROJECT_NAMESPACES) -> list[str]:
    """Log a WARNING for each unknown section, and each unknown option in the sections of
    ``own_namespace``; returns the messages."""
    known = {group: _names(opts, group) for group, opts in namespace_options(namespaces).items()}
    for key in conf:  # and what this process really reads, by section
        value = conf[key] if key not in ("config_file", "config_dir") else None
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            known.setdefault(key, set()).update(value)
        else:
            known.setdefault("DEFAULT", set()).add(key)
    owned = set(namespace_options([own_namespace])) | {"DEFAULT"}
    messages = []
    for path in config_files(conf):
        sections: dict[str, dict] = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except (OSError, cfg.ParseError):
            continue  # loading the files already reported it
        for section, options in sections.items():
            if section not in known and section not in LIBRARY_SECTIONS:
                messages.append(f"Unknown section [{section}] in {path}: ignored, fix or "
                                f"remove it{_closest(section, [*known, *LIBRARY_SECTIONS])}")
                continue
            if section not in owned:
                continue
            for name in options:
                if name not in known[section]:
                    closest = _closest(name, known[section])
                    messages.append(f"Unknown option [{section}]{name} in {path}: ignored, "
                                    f"fix or remove it{closest}")
    for message in messages:
        log.warning("%s", message)
    return messages
