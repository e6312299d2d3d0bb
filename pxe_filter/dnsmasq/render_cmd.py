"""``ironic-pxe-filter render-dnsmasq-config``: write the dnsmasq configuration from ``[dnsmasq]``.

Exit status: 0 written, unchanged or valid (``--check-only``); 1 the configuration was refused
(by our checks or by ``dnsmasq --test``) or could not be written, the old file kept;
2 bad usage or an unreadable configuration file.
"""

import argparse
import os
import sys
from collections.abc import Sequence

from pxe_filter import conf as filter_conf
from pxe_filter.common import statedirs
from pxe_filter.common.config import (
    FILTER_DEFAULTS,
    ConfigError,
    add_config_options,
    add_version_option,
)
from pxe_filter.dnsmasq import config, settings
from pxe_filter.dnsmasq.settings import DnsmasqConfigError, DnsmasqSettings

PROG = "ironic-pxe-filter render-dnsmasq-config"


def build_parser() -> argparse.ArgumentParser:
    """The command's own argument parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Render the dnsmasq configuration from the [dnsmasq] options, check it "
                    "with 'dnsmasq --test' and install it atomically (mode 0644). An invalid "
                    "configuration is reported and the installed file is kept.")
    add_config_options(parser, FILTER_DEFAULTS)
    add_version_option(parser)
    parser.add_argument("--output", metavar="PATH",
                        help="where to write (default: [dnsmasq]config_file); '-' prints the "
                             "checked configuration on stdout")
    parser.add_argument("--check-only", action="store_true",
                        help="render and check with dnsmasq, write nothing")
    return parser


def _make_directories(values: DnsmasqSettings, path: str, installing: bool) -> None:
    """Create the directory written to, the lease report directory and, when installing
    [dnsmasq]config_file, those of the files dnsmasq writes (its systemd unit creates them
    too), when missing."""
    wanted = [(path, "directory of the dnsmasq configuration")]
    if installing:
        wanted += [(values.leasefile, "directory of [dnsmasq]leasefile"),
                   (values.pid_file, "directory of [dnsmasq]pid_file")]
    for file, what in wanted:
        if file:
            statedirs.ensure_dir(os.path.dirname(os.path.abspath(file)), statedirs.READABLE,
                                 what)
    if values.lease_script:
        statedirs.ensure_dir(values.lease_report_dir, statedirs.READABLE,
                             "[dnsmasq]lease_report_dir")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        conf = filter_conf.load_for_command(args, PROG)
        values = settings.from_conf(conf)
        text = config.render(values)
        if args.check_only or args.output == "-":
            config.check(text, values.binary)
            if args.output == "-":
                sys.stdout.write(text)
            else:
                print("dnsmasq configuration is valid (nothing written)")
            return 0
        path = args.output or values.config_file
        _make_directories(values, path, installing=not args.output)
        # The script first: the configuration that names it is only installed after.
        script_changed = config.install_lease_script(values)
        changed = config.install(text, path, values.binary) or script_changed
    except ConfigError as exc:
        print(f"{PROG}: configuration error: {exc}", file=sys.stderr)
        return 2
    except DnsmasqConfigError as exc:
        print(f"{PROG}: {exc}\n{PROG}: nothing was written", file=sys.stderr)
        return 1
    print(f"{path}: {'written' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
