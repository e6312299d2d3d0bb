"""Loading configuration files for console scripts, with errors an operator can act on."""

import argparse
import os
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from oslo_config import cfg


class ConfigError(Exception):
    """A configuration problem, with a message that says what to fix."""


def load(conf: cfg.ConfigOpts, config_files: Sequence[str] = (),
         config_dirs: Sequence[str] = (), defaults: Sequence[str] = ()) -> None:
    """Parse ``config_files``/``config_dirs`` into ``conf`` (no command-line parsing); with
    neither given, those of ``defaults`` that exist."""
    if not config_files and not config_dirs:
        config_files = [path for path in defaults if os.path.exists(path)]
    args = [*(arg for path in config_files for arg in ("--config-file", path)),
            *(arg for path in config_dirs for arg in ("--config-dir", path))]
    try:
        conf(args=args, project="ironic", default_config_files=[], default_config_dirs=[])
    except cfg.ConfigFilesNotFoundError as exc:
        raise ConfigError(f"cannot read configuration file(s) {', '.join(exc.config_files)}: "
                          f"check the path and permissions") from None
    except cfg.ConfigDirNotFoundError as exc:
        raise ConfigError(f"configuration directory {exc.config_dir} does not exist") from None
    except cfg.Error as exc:  # a file that does not parse, among others
        raise ConfigError(f"invalid configuration: {exc}") from None


#: Read first by every service: the options several services must agree on (database,
#: message bus, auto-discovery). Each service's own file comes after it and wins.
SHARED_CONFIG = "/etc/ironic-inspection/shared.conf"
INSPECTION_CONFIG = "/etc/ironic-inspection/ironic-inspection.conf"
FILTER_CONFIG = "/etc/ironic-pxe-filter/ironic-pxe-filter.conf"
#: What the inspection service's commands and the filter's read when given no --config-*.
INSPECTION_DEFAULTS = (SHARED_CONFIG, INSPECTION_CONFIG)
FILTER_DEFAULTS = (SHARED_CONFIG, FILTER_CONFIG)


def add_config_options(parser: argparse.ArgumentParser | Any,
                       defaults: Sequence[str] = ()) -> None:
    """The oslo-style --config-file/--config-dir options every command takes.

    ``parser`` may also be an argument group (argparse does not name that type publicly).
    """
    where = (f"; default: {' then '.join(defaults)}, those that exist, when no --config-* "
             f"is given" if defaults else "")
    parser.add_argument("--config-file", action="append", default=[], metavar="PATH",
                        help=f"configuration file (repeatable; later files win{where})")
    parser.add_argument("--config-dir", action="append", default=[], metavar="DIR",
                        help="directory of *.conf files read after --config-file")


def add_version_option(parser: argparse.ArgumentParser) -> None:
    """``--version``: print ``PROG VERSION`` (this distribution's) and exit 0, as oslo.config's
    commands do."""
    try:
        version = metadata.version("ironic-pxe-filter")
    except metadata.PackageNotFoundError:
        version = "unknown"  # run from a bare source tree
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
