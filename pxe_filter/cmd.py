"""``ironic-pxe-filter``: command line, logging, exit statuses (0 ok, 1 runtime, 2 config)."""

import argparse
import importlib
import logging
import sys
import textwrap
from collections.abc import Sequence

from oslo_config import cfg

from pxe_filter import conf as filter_conf
from pxe_filter.common import config, lifecycle, logs, unknown_options

LOG = logging.getLogger("pxe_filter")

PROG = "ironic-pxe-filter"


def _options_help() -> str:
    lines = ["configuration file options (read again on SIGHUP when marked 'reloadable'):"]
    groups = filter_conf.list_opts()
    groups[0] = ("DEFAULT", [*groups[0][1], cfg.StrOpt(
        "transport_url", help="Message bus URL (e.g. rabbit://user:pass@host:5672/). When "
                              "set, update_pxe_filters broadcasts are applied within "
                              "milliseconds; unset, only the periodic sync runs.")])
    for group, opts in groups:
        lines.append(f"  [{group}]")
        for opt in opts:
            # The real default on this machine ([DEFAULT]host: its hostname), not the
            # sample's placeholder.
            default = ",".join(opt.default) if isinstance(opt.default, list) else opt.default
            extra = f" (default: {default})" if default not in (None, "") else ""
            extra += " (reloadable)" if opt.mutable else ""
            text = textwrap.fill(f"{opt.help}{extra}", width=76, initial_indent="      ",
                                 subsequent_indent="      ")
            lines.append(f"    {opt.name}\n{text}")
    lines.append("  logging: oslo.log's options in [DEFAULT]: debug (reloadable), log_file,"
                 "\n    log_dir, use_stderr (default true), use_json, use_journal, "
                 "log_config_append ...")
    lines.append("\nother commands:\n  ironic-pxe-filter render-dnsmasq-config --config-file F"
                 "\n      render the [dnsmasq] options into dnsmasq's configuration (see its "
                 "--help)"
                 "\n  ironic-pxe-filter status --config-file F [--format json]"
                 "\n      what the running daemon last did (exit 3 if it does not run)"
                 "\n  ironic-pxe-filter explain MAC --config-file F [--format json]"
                 "\n      what dnsmasq will do for MAC, and why (running daemon or not)")
    lines.append("\nsignals: SIGHUP reloads, resyncs and reloads dnsmasq; SIGTERM/SIGINT stop "
                 "(exit 0).")
    lines.append("exit status: 0 stopped cleanly, 1 runtime error, 2 configuration error.")
    return "\n".join(lines)


#: The commands besides the daemon itself, each with its own --help, and their modules
#: (imported only for that command).
COMMANDS = {"render-dnsmasq-config": "pxe_filter.dnsmasq.render_cmd",
            "status": "pxe_filter.status.command", "explain": "pxe_filter.explain"}
USAGE = ("%(prog)s [-h] [--config-file PATH] [--config-dir DIR] [--version] [--once] "
         "[--debug]\n"
         "       %(prog)s render-dnsmasq-config [-h] [--config-file PATH] [--output PATH] "
         "[--check-only]\n"
         "       %(prog)s status [-h] [--config-file PATH] [--format {human,json}]\n"
         "       %(prog)s explain [-h] [--config-file PATH] [--format {human,json}] MAC")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (options, plus every configuration option in the epilog)."""
    parser = argparse.ArgumentParser(
        prog="ironic-pxe-filter", usage=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Keep dnsmasq's --dhcp-hostsdir allow/deny files in step with the "
                    "node/port database and apply update_pxe_filters broadcasts.",
        epilog=_options_help())
    config.add_config_options(parser, config.FILTER_DEFAULTS)
    config.add_version_option(parser)
    parser.add_argument("--once", action="store_true",
                        help="run one full sync and exit (1 if a file could not be written)")
    parser.add_argument("--debug", action="store_true",
                        help="log at DEBUG level (every sync, every MAC broadcast); same as "
                             "[DEFAULT]debug = true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
    parser = build_parser()
    if argv and not argv[0].startswith("-"):
        parser.error(f"unknown command {argv[0]!r}: the commands are "
                     f"{', '.join(COMMANDS)}; the daemon itself takes options only")
    args = parser.parse_args(argv)
    conf = cfg.CONF  # oslo.messaging reads its own groups from the global object
    logs.register_options(conf, PROG)
    from pxe_filter import daemon  # noqa: PLC0415 - after logging

    filter_conf.register_opts(conf)
    life = lifecycle.Lifecycle()
    life.install_signal_handlers(reload=True)
    built: list[daemon.Daemon] = []

    def start() -> str | int:
        built.append(daemon.Daemon(conf, life, once=args.once))
        return built[0].start()

    def serve() -> None:
        built[0].run_loop()

    def shutdown() -> None:
        if built:
            built[0].shutdown()

    def load() -> None:
        config.load(conf, args.config_file, args.config_dir, config.FILTER_DEFAULTS)
        logs.setup(conf, PROG, debug=args.debug)
        logs.log_option_values(conf, LOG)
        unknown_options.warn_unknown_options(conf, LOG, "ironic-pxe-filter")

    return lifecycle.run(LOG, life, load=load, start=start, serve=serve, shutdown=shutdown)


if __name__ == "__main__":
    sys.exit(main())
