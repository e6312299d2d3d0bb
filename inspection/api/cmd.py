"""``ironic-inspection-api``: serve the API with waitress (exit 0 on SIGTERM, 1 on a runtime
error such as an unreachable database, 2 on a configuration error)."""

import argparse
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import Sequence

from oslo_config import cfg

from inspection import conf as inspection_conf
from pxe_filter.common import config, systemd
from pxe_filter.common.logs import setup_logging

LOG = logging.getLogger("inspection.api")

# Headroom above [api]max_request_body_size so that the app, not waitress, answers the 413
# (as JSON); waitress still stops a client streaming gigabytes.
_WAITRESS_BODY_FACTOR = 4


class StartupError(Exception):
    """A reason not to start, shown in one line; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog="ironic-inspection-api",
        description="HTTP API of the inspection service: the ramdisk callback "
                    "(/v1/continue_inspection), inspection rules, nodes and ports.")
    config.add_config_options(parser)
    parser.add_argument("--debug", action="store_true", help="log at DEBUG level")
    return parser


def is_loopback(host: str) -> bool:
    """True if ``host`` (address or name) is only reachable from this machine."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def read_all_options(conf: cfg.ConfigOpts) -> None:
    """Read every option once: oslo.config checks values only when they are read."""
    for group, opts in inspection_conf.list_opts():
        section = conf if group == "DEFAULT" else getattr(conf, group)
        for opt in opts:
            try:
                getattr(section, opt.dest)
            except (cfg.ConfigFileValueError, ValueError) as exc:
                raise StartupError(f"invalid value of [{group}]{opt.name}: "
                                   f"{str(exc).rsplit('is not valid: ', 1)[-1]}") from None


def check_conf(conf: cfg.ConfigOpts) -> None:
    """Refuse invalid values, and an unauthenticated API reachable from other machines."""
    read_all_options(conf)
    if (conf.api.auth_strategy == "noauth" and not is_loopback(conf.api.host_ip)
            and not conf.api.allow_insecure_noauth):
        raise StartupError(f"[api]auth_strategy = noauth would let anyone who reaches "
                           f"{conf.api.host_ip} change nodes and rules: listen on 127.0.0.1, "
                           f"use http_basic, or set [api]allow_insecure_noauth = true")


def check_database(engine) -> None:
    """The database answers and has a node table (ours or Ironic's)."""
    import sqlalchemy as sa  # noqa: PLC0415

    from pxe_filter.common.database import check_connection, describe_url  # noqa: PLC0415

    check_connection(engine)
    if "nodes" not in sa.inspect(engine).get_table_names():
        raise StartupError(f"database {describe_url(engine.url)} has no schema: run "
                           f"'ironic-inspection dbsync --config-file ...' first", code=1)


def build(conf: cfg.ConfigOpts):
    """Check everything that can be wrong before listening; returns the app."""
    from inspection.api.app import create_app  # noqa: PLC0415 - after logging is set up
    from inspection.api.auth import HtpasswdError  # noqa: PLC0415
    from pxe_filter.common.database import DatabaseError, engine_from_conf  # noqa: PLC0415

    check_conf(conf)
    try:
        engine = engine_from_conf(conf)
        check_database(engine)
        return create_app(conf, engine=engine)
    except (HtpasswdError, config.ConfigError) as exc:
        raise StartupError(str(exc)) from None
    except DatabaseError as exc:
        raise StartupError(str(exc), code=1) from None


def _stop(signum, _frame):
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    setup_logging(args.debug)
    conf = cfg.CONF  # oslo.messaging reads its own option groups from the global object
    inspection_conf.register_opts(conf)
    try:
        config.load(conf, args.config_file, args.config_dir)
        app = build(conf)
    except config.ConfigError as exc:
        LOG.critical("Configuration error: %s", exc)
        return 2
    except StartupError as exc:
        LOG.critical("Cannot start: %s", exc)
        return exc.code
    from waitress import create_server  # noqa: PLC0415

    from inspection.api.app import close_app  # noqa: PLC0415

    try:
        server = create_server(
            app, host=conf.api.host_ip, port=conf.api.port, threads=conf.api.threads,
            connection_limit=conf.api.connection_limit,
            channel_timeout=conf.api.channel_timeout,
            ident="ironic-inspection-api", clear_untrusted_proxy_headers=True,
            max_request_body_size=conf.api.max_request_body_size * _WAITRESS_BODY_FACTOR)
    except OSError as exc:
        LOG.critical("Cannot listen on %s port %s: %s", conf.api.host_ip, conf.api.port,
                     exc.strerror or exc)
        close_app(app)
        return 1
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    LOG.info("Listening on http://%s:%s (auth: %s)", conf.api.host_ip, conf.api.port,
             conf.api.auth_strategy)
    systemd.notify("READY=1", f"STATUS=listening on {conf.api.host_ip}:{conf.api.port}")
    try:
        server.run()
    finally:
        LOG.info("Stopping")
        server.close()
        close_app(app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
