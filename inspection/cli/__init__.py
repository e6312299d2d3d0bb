"""``ironic-inspection``: the admin command line.

Exit statuses scripts can rely on: 0 success; 1 the API (or the database, or the message bus)
refused or failed, with its error in one line on stderr; 2 bad usage or configuration.
"""

import argparse
import sys
from collections.abc import Sequence

from inspection.cli import dbsync, filters, nodes, ports, rules
from inspection.cli.errors import CommandError, UsageError
from pxe_filter.common.config import (
    INSPECTION_DEFAULTS,
    ConfigError,
    add_config_options,
    add_version_option,
)
from pxe_filter.common.database import DatabaseError

__all__ = ["CommandError", "UsageError", "build_parser", "main"]

# Each module contributes its sub-commands; the order here is the order of --help.
_MODULES = (rules, nodes, ports, dbsync, filters)
#: Options people put before the command out of habit (openstack-client style); each takes
#: a value. They are moved after the command, where the sub-commands define them.
LEADING_OPTIONS = ("--url", "--username", "--password", "-f", "--format", "--config-file",
                   "--config-dir")


def _move_leading_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` with the options of :data:`LEADING_OPTIONS` given before the command moved
    after it, and the names of the moved options."""
    moved: list[str] = []
    names: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        name = token.split("=", 1)[0]
        if name in LEADING_OPTIONS:
            attached = "=" in token
            moved += argv[index:index + (1 if attached else 2)]
            names.append(name)
            index += 1 if attached else 2
        elif token.startswith("-f") and len(token) > 2 and not token.startswith("--"):
            moved.append(token)  # -fjson
            names.append("-f")
            index += 1
        else:
            break
    return argv[index:] + moved, names


def config_parent() -> argparse.ArgumentParser:
    """The --config-file/--config-dir options every sub-command accepts."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("configuration")
    add_config_options(group, INSPECTION_DEFAULTS)
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser."""
    parser = argparse.ArgumentParser(
        prog="ironic-inspection",
        description="Administer the inspection service and the PXE filters.",
        epilog="The options --url, --username, --password, -f/--format (API commands) and "
               "--config-file, --config-dir (dbsync, filters notify) may also come before "
               "COMMAND. Exit status: 0 success, 1 the API or another service refused or "
               "failed (error on stderr, one line), 2 bad usage or configuration.")
    add_version_option(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parent = config_parent()
    for module in _MODULES:
        module.add_commands(sub, parent)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 failed, 2 bad usage or configuration)."""
    parser = build_parser()
    argv, moved = _move_leading_options(list(sys.argv[1:] if argv is None else argv))
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = " ".join(t for t in argv[:argv.index(unknown[0])] if not t.startswith("-"))
        misplaced = [name for name in moved if name in unknown]
        if misplaced:
            parser.error(f"{', '.join(misplaced)} cannot be used with '{command}'")
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"ironic-inspection: configuration error: {exc}", file=sys.stderr)
        return 2
    except CommandError as exc:
        print(f"ironic-inspection: {exc}", file=sys.stderr)
        return exc.exit_code
    except DatabaseError as exc:
        print(f"ironic-inspection: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `ironic-inspection rule list | head`: the reader left; not an error of ours.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
