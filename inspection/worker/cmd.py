"""``ironic-inspection-worker``: processes inspection data cast by the API on the message bus.

Exit statuses: 0 stopped by SIGTERM/SIGINT, 1 runtime error (database unreachable, message
bus refusing the worker), 2 configuration error. Every start-up error is one log line saying
what to fix. A message bus that does not answer at start-up is waited for (oslo.messaging
retries forever, like every OpenStack service); SIGTERM stops the wait at once, and under
systemd ``TimeoutStartSec`` bounds it since READY=1 is sent only once consuming.
"""

import argparse
import logging
import sys
import threading
import time
from collections.abc import Sequence

import sqlalchemy as sa
from oslo_config import cfg

from inspection import conf as inspection_conf
from inspection import metrics, process_identity
from inspection.common import secret_text
from inspection.common.url_credentials import mask_url_passwords
from pxe_filter.common import (
    config,
    lifecycle,
    logs,
    messaging,
    prometheus,
    systemd,
    unknown_options,
)
from pxe_filter.common.config import ConfigError
from pxe_filter.common.database import (
    DatabaseError,
    check_connection,
    describe_url,
    engine_from_conf,
)
from pxe_filter.common.lifecycle import ServiceError

LOG = logging.getLogger("inspection.worker")
PROG = "ironic-inspection-worker"

#: The table of accepted callbacks (schema revision 0002).
CALLBACKS_TABLE = "inspection_callbacks"
#: Seconds without an answer from the message bus before saying that the worker waits for it.
BUS_WAIT_WARNING = 5.0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Process inspection data that ironic-inspection-api casts on "
                    "[DEFAULT]transport_url (topic ironic-inspection.worker; several workers "
                    "share the load), and fail inspections that time out.",
        epilog="Workers may share [DEFAULT]host: each process reserves nodes under an "
               "identity of its own (host/worker/<id drawn at start>), and what a crashed "
               "process held is taken over once its heartbeat is stale. Signals: "
               "SIGTERM/SIGINT finish the inspections in progress and stop. Exit status: 0 "
               "stopped, 1 runtime error, 2 configuration error.")
    config.add_config_options(parser, config.INSPECTION_DEFAULTS)
    config.add_version_option(parser)
    parser.add_argument("--debug", action="store_true",
                        help="log at DEBUG level (same as [DEFAULT]debug = true)")
    return parser


class Worker:
    """One worker process: RPC server, timeout task, signal-driven main loop."""

    def __init__(self, conf: cfg.ConfigOpts, life: lifecycle.Lifecycle) -> None:
        self.conf = conf
        self.life = life
        self.engine = None
        self.transport = None
        self.server = None
        self.timeout_task = None
        self.notifier = None
        self.metrics_server = None
        self.runner = None
        self.power = None
        self.inspector = None  # the out-of-band inspector, built with the service

    def start(self) -> str | int:
        """Connect, load the pipeline, start processing stored callbacks (after clearing this
        host's stale reservations and claims), consume wake-ups; ServiceError or ConfigError.

        Returns the READY status, or 0 when stopped while waiting for the message bus."""
        try:
            url = messaging.configured_transport_url(self.conf)
        except (cfg.Error, ValueError) as exc:
            raise ConfigError(f"invalid [DEFAULT]transport_url: {exc}") from None
        if not url:
            raise ConfigError("[DEFAULT]transport_url is not set: the worker consumes tasks "
                              "from the message bus (e.g. rabbit://user:pass@host:5672/); "
                              "without a bus, ironic-inspection-api processes inspection "
                              "data itself and no worker is needed")
        try:
            self.engine = engine_from_conf(self.conf)
            check_connection(self.engine)
        except DatabaseError as exc:
            raise ServiceError(f"{exc}; check [database]connection and that the database "
                               f"server is running") from None
        tables = sa.inspect(self.engine).get_table_names()
        if "nodes" not in tables:
            raise ServiceError(f"database {describe_url(self.engine.url)} has no schema: run "
                               f"'ironic-inspection dbsync --config-file ...' first")
        if CALLBACKS_TABLE not in tables:
            raise ServiceError(f"database {describe_url(self.engine.url)} has no table "
                               f"{CALLBACKS_TABLE} (added by this version): run "
                               f"'ironic-inspection dbsync --config-file ...' to upgrade it")
        try:
            inspection_conf.check_processing_opts(self.conf)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        service = self._load_service()
        self._start_metrics()
        from inspection.power.actor import PowerActor  # noqa: PLC0415
        from inspection.processing import callbacks  # noqa: PLC0415
        from inspection.timeouts import TimeoutTask  # noqa: PLC0415
        from inspection.worker import rpc  # noqa: PLC0415 - after backend selection
        from inspection.worker.runner import CallbackRunner  # noqa: PLC0415
        from pxe_filter.broadcast import FilterNotifier  # noqa: PLC0415

        # Before the bus: stored callbacks are processed even while the bus is down.
        runner = CallbackRunner(self.engine, service, self.conf, rpc.MAX_CONCURRENT)
        try:
            runner.start()
        except DatabaseError as exc:
            raise ServiceError(str(exc)) from None
        self.runner = runner
        # BMC work (verifications, boots, power changes) runs where processing runs.
        self.power = PowerActor(self.engine, self.conf, service.notifier,
                                inspector=self.inspector)
        self.power.start()
        endpoint = rpc.WorkerEndpoint(
            self._wake, lambda node_uuid, data: callbacks.store(self.engine, node_uuid,
                                                                data))
        if not self._start_consuming(url, endpoint):
            return lifecycle.EXIT_OK  # stopped while waiting for the message bus
        self.notifier = FilterNotifier.from_conf(self.conf)
        self.timeout_task = TimeoutTask.from_conf(self.engine, self.conf, self.notifier)
        self.timeout_task.start()
        LOG.info("Consuming %s as server %s (inspect-wait timeout checked every %s s)",
                 rpc.TOPIC, self.conf.host, self.timeout_task.interval)
        return f"consuming as {self.conf.host}"

    def _wake(self) -> None:
        """A wake-up from the API: stored callbacks, or BMC work, may be due."""
        if self.runner is not None:
            self.runner.wake()
        if self.power is not None:
            self.power.wake()

    def _start_consuming(self, url: str, endpoint) -> bool:
        """Connect and start the RPC server; False if a stop signal came first.

        oslo.messaging retries an unreachable bus forever inside ``server.start()``, so that
        runs in a helper thread while the main thread keeps handling signals.
        """
        from inspection.worker import rpc  # noqa: PLC0415 - after backend selection

        result: dict = {}

        def connect() -> None:
            try:
                transport = result["transport"] = messaging.get_transport(url)
                result["server"] = rpc.start_server(transport, self.conf.host, endpoint)
            except Exception as exc:  # driver-specific exception types
                result["error"] = exc
            finally:
                self.life.wake()  # wake the wait below

        thread = threading.Thread(target=connect, name="bus-connect", daemon=True)
        thread.start()
        started, warned = time.monotonic(), False
        while thread.is_alive() and not self.life.stopping:
            self.life.wait(1.0)
            if not warned and time.monotonic() - started > BUS_WAIT_WARNING:
                warned = True
                LOG.warning("The message bus at %s does not answer after %.0f s; waiting for "
                            "it (SIGTERM stops the worker)",
                            mask_url_passwords(url, "***"), BUS_WAIT_WARNING)
                systemd.notify("STATUS=waiting for the message bus")
        if thread.is_alive():
            # Stopping: the helper thread is stuck in the driver's retry loop; it is a daemon
            # thread, and cleaning up its transport could block as well.
            LOG.info("Stopping on signal while waiting for the message bus")
            return False
        if "error" in result:
            self.transport = result.get("transport")
            raise ServiceError(f"cannot consume from [DEFAULT]transport_url: "
                               f"{result['error']}")
        self.transport, self.server = result["transport"], result["server"]
        return not self.life.stopping

    def _start_metrics(self) -> None:
        opts = self.conf.worker
        self.metrics_server = prometheus.MetricsServer(metrics.REGISTRY, opts.prometheus_host,
                                                       opts.prometheus_port)
        metrics.show_processing()
        try:
            self.metrics_server.start()
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on [worker]prometheus_host:"
                              f"prometheus_port {opts.prometheus_host}:"
                              f"{opts.prometheus_port}: {exc.strerror or exc}") from None

    def _load_service(self):
        from inspection.processing.out_of_band import OutOfBandInspector  # noqa: PLC0415
        from inspection.processing.service import InspectionService  # noqa: PLC0415

        try:
            service = InspectionService.from_conf(self.conf, engine=self.engine)
            self.inspector = OutOfBandInspector.from_service(service)
            return service
        except DatabaseError as exc:
            raise ServiceError(str(exc)) from None

    def shutdown(self) -> None:
        """Stop consuming (in-flight inspections finish), stop the timeout task, disconnect."""
        if self.server is not None:
            from inspection.worker import rpc  # noqa: PLC0415

            try:
                rpc.stop_server(self.server)
            except Exception as exc:
                LOG.warning("Stopping the RPC server: %s", exc)
            LOG.debug("Stopped consuming")
        if self.runner is not None:
            self.runner.stop(timeout=30)
            LOG.debug("Callback processing stopped")
        if self.power is not None:
            self.power.stop(timeout=30)
            LOG.debug("BMC work stopped")
        if self.timeout_task is not None:
            self.timeout_task.stop(timeout=10)
            LOG.debug("Timeout task stopped")
        if self.notifier is not None:
            self.notifier.close()
        if self.transport is not None:
            self.transport.cleanup()
            LOG.debug("Disconnected from the message bus")
        if self.metrics_server is not None:
            self.metrics_server.stop()
        if self.engine is not None:
            self.engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    conf = cfg.CONF  # oslo.messaging reads its own groups from the global object
    logs.register_options(conf, PROG)
    inspection_conf.register_opts(conf)
    life = lifecycle.Lifecycle()
    life.install_signal_handlers()
    worker = Worker(conf, life)

    def load() -> None:
        config.load(conf, args.config_file, args.config_dir, config.INSPECTION_DEFAULTS)
        logs.setup(conf, PROG, debug=args.debug)
        process_identity.set_role("worker")
        secret_text.install_log_masking()  # ramdisk and BMC text may quote passwords
        logs.log_option_values(conf, LOG)
        unknown_options.warn_unknown_options(conf, LOG, "ironic-inspection")

    return lifecycle.run(LOG, life, load=load, start=worker.start, serve=life.idle,
                         shutdown=worker.shutdown)

if __name__ == "__main__":
    sys.exit(main())
