"""``ironic-inspection-api``: serve the API with waitress (exit 0 on SIGTERM, 1 on a runtime
error such as an unreachable database, 2 on a configuration error)."""

import argparse
import contextlib
import ipaddress
import logging
import socket
import sys
from collections.abc import Sequence

from oslo_config import cfg

from inspection import conf as inspection_conf
from inspection import process_identity
from inspection.common import secret_text
from pxe_filter.common import config, lifecycle, logs, unknown_options
from pxe_filter.common.config import ConfigError
from pxe_filter.common.lifecycle import ServiceError

LOG = logging.getLogger("inspection.api")
PROG = "ironic-inspection-api"

# Headroom above [api]max_request_body_size so that the app, not waitress, answers the 413
# (as JSON); waitress still stops a client streaming gigabytes.
_WAITRESS_BODY_FACTOR = 4


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="HTTP API of the inspection service: the ramdisk callback "
                    "(/v1/continue_inspection), inspection rules, nodes and ports.")
    config.add_config_options(parser, config.INSPECTION_DEFAULTS)
    config.add_version_option(parser)
    parser.add_argument("--debug", action="store_true",
                        help="log at DEBUG level (same as [DEFAULT]debug = true)")
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
                raise ConfigError(f"invalid value of [{group}]{opt.name}: "
                                  f"{str(exc).rsplit('is not valid: ', 1)[-1]}") from None


def check_conf(conf: cfg.ConfigOpts) -> None:
    """Refuse invalid values, and an unauthenticated API reachable from other machines."""
    read_all_options(conf)
    try:
        inspection_conf.check_processing_opts(conf)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if conf.api.auth_strategy == "keystone":
        from inspection.api.middleware import keystone_problem  # noqa: PLC0415

        problem = keystone_problem(conf)
        if problem:
            raise ConfigError(problem)
    if conf.api.auth_strategy == "http_basic":
        from inspection.api.auth import default_concurrency  # noqa: PLC0415

        held = (conf.api.auth_concurrency or default_concurrency()) + conf.api.auth_queue_length
        if held > conf.api.threads - 2:
            raise ConfigError(f"[api]auth_concurrency + auth_queue_length ({held}) would let "
                              f"password checks hold the threads the ramdisk callback needs: "
                              f"keep them at most [api]threads - 2 ({conf.api.threads - 2})")
    if (conf.api.auth_strategy == "noauth" and not is_loopback(conf.api.host_ip)
            and not conf.api.allow_insecure_noauth):
        raise ConfigError(f"[api]auth_strategy = noauth would let anyone who reaches "
                          f"{conf.api.host_ip} change nodes and rules: listen on 127.0.0.1, "
                          f"use http_basic, or set [api]allow_insecure_noauth = true")


def check_database(engine) -> None:
    """The database answers and has our schema (a node table and the callbacks table)."""
    import sqlalchemy as sa  # noqa: PLC0415

    from pxe_filter.common.database import check_connection, describe_url  # noqa: PLC0415

    check_connection(engine)
    tables = sa.inspect(engine).get_table_names()
    if "nodes" not in tables:
        raise ServiceError(f"database {describe_url(engine.url)} has no schema: run "
                           f"'ironic-inspection dbsync --config-file ...' first")
    if "inspection_callbacks" not in tables:
        raise ServiceError(f"database {describe_url(engine.url)} has no table "
                           f"inspection_callbacks (added by this version): run "
                           f"'ironic-inspection dbsync --config-file ...' to upgrade it")


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
    except HtpasswdError as exc:
        raise ConfigError(str(exc)) from None
    except DatabaseError as exc:
        raise ServiceError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    conf = cfg.CONF  # oslo.messaging reads its own option groups from the global object
    logs.register_options(conf, PROG)
    inspection_conf.register_opts(conf)
    life = lifecycle.Lifecycle()
    # waitress blocks the main thread in its own loop: a stop signal raises SystemExit there.
    life.install_signal_handlers(interrupt=True)
    api = _Api(conf)

    def load() -> None:
        config.load(conf, args.config_file, args.config_dir, config.INSPECTION_DEFAULTS)
        logs.setup(conf, PROG, debug=args.debug)
        process_identity.set_role("api")
        secret_text.install_log_masking()  # ramdisk and BMC text may quote passwords
        logs.log_option_values(conf, LOG)
        unknown_options.warn_unknown_options(conf, LOG, "ironic-inspection")

    return lifecycle.run(LOG, life, load=load, start=api.start, serve=api.serve,
                         shutdown=api.shutdown)


class _Api:
    """The app and its waitress server."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self.app = None
        self.server = None

    def start(self) -> str:
        """Build the app (checking everything) and bind the socket; ServiceError, ConfigError."""
        from waitress import create_server  # noqa: PLC0415

        from inspection.api import connections, queue_log  # noqa: PLC0415

        conf = self.conf
        self.app = build(conf)
        try:
            self.server = create_server(
                self.app, host=conf.api.host_ip, port=conf.api.port, threads=conf.api.threads,
                connection_limit=conf.api.connection_limit,
                asyncore_use_poll=True,  # select() fails past file descriptor 1023
                channel_timeout=conf.api.channel_timeout,
                ident="ironic-inspection-api",
                # Behind a proxy, oslo.middleware's HTTPProxyToWSGI reads them; else dropped.
                clear_untrusted_proxy_headers=not conf.oslo_middleware
                .enable_proxy_headers_parsing,
                max_request_body_size=conf.api.max_request_body_size * _WAITRESS_BODY_FACTOR)
        except OSError as exc:
            raise ServiceError(f"Cannot listen on {conf.api.host_ip} port {conf.api.port}: "
                               f"{exc.strerror or exc}") from None
        connections.install(self.server, conf.api.connections_per_client,
                            conf.api.request_deadline, conf.api.connection_limit,
                            conf.api.connection_reserve)
        queue_log.install(conf.api.threads)
        LOG.info("Listening on http://%s:%s (auth: %s)", conf.api.host_ip, conf.api.port,
                 conf.api.auth_strategy)
        return f"listening on {conf.api.host_ip}:{conf.api.port}"

    def serve(self) -> None:
        """Serve until a stop signal (SystemExit from the signal handler)."""
        with contextlib.suppress(SystemExit):
            self.server.run()

    def shutdown(self) -> None:
        """Close the socket and release the app's threads and connections."""
        from inspection.api.app import close_app  # noqa: PLC0415

        if self.server is not None:
            self.server.close()
        if self.app is not None:
            close_app(self.app)

if __name__ == "__main__":
    sys.exit(main())
