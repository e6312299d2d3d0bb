"""``ironic-inspection filters notify``: broadcast allow/deny to every PXE filter daemon."""

import argparse

from oslo_config import cfg

from inspection import conf as inspection_conf
from pxe_filter import broadcast
from pxe_filter.common import config, logs, macs, messaging


def add_commands(sub, parent: argparse.ArgumentParser) -> None:
    """Register the filters sub-commands."""
    filters = sub.add_parser("filters", help="talk to the PXE filter daemons")
    filters_sub = filters.add_subparsers(dest="filters_command", metavar="COMMAND",
                                         required=True)
    notify = filters_sub.add_parser(
        "notify", parents=[parent],
        help="broadcast MACs to allow or deny to every ironic-pxe-filter",
        description="Fanout-cast update_pxe_filters on [DEFAULT]transport_url. Daemons that "
                    "are down miss it and catch up at their next full sync; a MAC given in "
                    "both lists is denied.")
    notify.add_argument("--allow", action="append", default=[], metavar="MAC",
                        help="MAC to serve (repeatable)")
    notify.add_argument("--deny", action="append", default=[], metavar="MAC",
                        help="MAC to refuse (repeatable)")
    notify.add_argument("--transport-url", metavar="URL",
                        help="message bus URL (default: [DEFAULT]transport_url)")
    notify.set_defaults(func=run_notify)


def run_notify(args: argparse.Namespace) -> int:
    """Validate the MACs, then broadcast them."""
    from inspection.cli import CommandError, UsageError  # noqa: PLC0415 - import cycle

    if not args.allow and not args.deny:
        raise UsageError("nothing to send: give at least one --allow or --deny MAC")
    try:
        allow = [macs.normalize_mac(m) for m in args.allow]
        deny = [macs.normalize_mac(m) for m in args.deny]
    except macs.InvalidMAC as exc:  # a bad argument: usage, as docs/cli.md says
        raise UsageError(str(exc)) from None
    conf = cfg.CONF
    logs.register_options(conf, "ironic-inspection")
    inspection_conf.register_opts(conf)
    config.load(conf, args.config_file, args.config_dir, config.INSPECTION_DEFAULTS)
    logs.setup(conf, "ironic-inspection")
    url = args.transport_url or messaging.configured_transport_url(conf)
    if not url:
        raise CommandError("no message bus: set [DEFAULT]transport_url (e.g. "
                           "rabbit://user:pass@host:5672/) or pass --transport-url")
    transport = messaging.get_transport(url)
    try:
        broadcast.broadcast(transport, allow=allow, deny=deny)
    except Exception as exc:  # the broker's own exception types vary by driver
        raise CommandError(f"broadcast failed: {exc}") from None
    finally:
        transport.cleanup()
    print(f"Broadcast update_pxe_filters: allow {len(allow)}, deny {len(deny)} MAC(s).")
    return 0
