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


#: The commands besides the daemon itself: their modules (each with ``run(args, conf)``,
#: imported only for that command), what they do, and their --help's description.
COMMANDS = {
    "render-dnsmasq-config": (
        "pxe_filter.dnsmasq.render_cmd",
        "render the [dnsmasq] options into dnsmasq's configuration",
        "Render the dnsmasq configuration from the [dnsmasq] options, check it with 'dnsmasq "
        "--test' and install it atomically (mode 0644). An invalid configuration is reported "
        "and the installed file is kept."),
    "status": (
        "pxe_filter.status.command",
        "what the running daemon last did (exit 3 if it does not run)",
        "Show what the running ironic-pxe-filter last did: MAC counts, wildcard policy, last "
        "sync and broadcast, files repaired, errors and the dnsmasq it drives."),
    "explain": (
        "pxe_filter.explain",
        "what dnsmasq will do for a MAC, and why (running daemon or not)",
        "Say what dnsmasq will do for a MAC (allow or deny) and why: its file in the hostsdir, "
        "the unknown-MAC wildcard, its port and node in the database, and its last DHCP "
        "lease."),
}


def command_parser(name: str) -> argparse.ArgumentParser:
    """The argument parser of command ``name`` (in COMMANDS)."""
    parser = argparse.ArgumentParser(prog=f"{PROG} {name}", description=COMMANDS[name][2])
    config.add_config_options(parser, config.FILTER_DEFAULTS)
    config.add_version_option(parser)
    if name == "render-dnsmasq-config":
        parser.add_argument("--output", metavar="PATH",
                            help="where to write (default: [dnsmasq]config_file); '-' prints "
                                 "the checked configuration on stdout")
        parser.add_argument("--check-only", action="store_true",
                            help="render and check with dnsmasq, write nothing")
    else:
        parser.add_argument("--format", choices=["human", "json"], default="human")
    if name == "explain":
        parser.add_argument("mac", metavar="MAC", help="the MAC address (any common spelling)")
    return parser


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
    lines.append("\nother commands (usage above, each with its own --help):")
    lines += [f"  {name}: {summary}" for name, (_, summary, _) in COMMANDS.items()]
    lines.append("\nsignals: SIGHUP reloads, resyncs and reloads dnsmasq; SIGTERM/SIGINT stop "
                 "(exit 0).")
    lines.append("exit status: 0 stopped cleanly, 1 runtime error, 2 configuration error.")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (options, plus every configuration option in the epilog)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
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
    # The usage lists every command's, each from its own parser.
    parser.usage = "\n       ".join(p.format_usage().removeprefix("usage: ").rstrip()
                                    for p in [parser, *map(command_parser, COMMANDS)])
    return parser


def run_command(name: str, argv: Sequence[str]) -> int:
    """Run command ``name`` besides the daemon: parse ``argv``, load the daemon's configuration
    (the files of --config-file/--config-dir, or the defaults; logging set up) and return its
    module's ``run(args, conf)``, or 2 after a configuration error (while loading or from
    ``run``)."""
    parser = command_parser(name)
    args = parser.parse_args(argv)
    conf = cfg.ConfigOpts()
    logs.register_options(conf, parser.prog)
    filter_conf.register_opts(conf)
    try:
        config.load(conf, args.config_file, args.config_dir, config.FILTER_DEFAULTS)
        logs.setup(conf, parser.prog)
        return importlib.import_module(COMMANDS[name][0]).run(args, conf)
    except (config.ConfigError, cfg.Error) as exc:
        print(f"{parser.prog}: configuration error: {exc}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        return run_command(argv[0], argv[1:])
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
