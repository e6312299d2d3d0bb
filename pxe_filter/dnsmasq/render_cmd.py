"""``ironic-pxe-filter render-dnsmasq-config``: write the dnsmasq configuration from ``[dnsmasq]``.

Exit status: 0 written, unchanged or valid (``--check-only``); 1 the configuration was refused
(by our checks or by ``dnsmasq --test``) or could not be written, the old file kept;
2 bad usage or an unreadable configuration file.
"""

import argparse
import os
import sys

from oslo_config import cfg

from pxe_filter.common import statedirs
from pxe_filter.dnsmasq import config, settings
from pxe_filter.dnsmasq.settings import DnsmasqConfigError, DnsmasqSettings

PROG = "ironic-pxe-filter render-dnsmasq-config"


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


def run(args: argparse.Namespace, conf: cfg.ConfigOpts) -> int:
    """Render, check and write (or print) the configuration of ``conf``; returns the exit
    status."""
    try:
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
    except DnsmasqConfigError as exc:
        print(f"{PROG}: {exc}\n{PROG}: nothing was written", file=sys.stderr)
        return 1
    print(f"{path}: {'written' if changed else 'unchanged'}")
    return 0
