"""Options that the filter and the inspection service must agree on, defined once.

Both register these same objects, so one shared configuration file can hold them for every
service (oslo.config accepts an identical option registered twice).
"""

import socket

from oslo_config import cfg

host_opt = cfg.StrOpt(
    "host", default=socket.gethostname(), sample_default="localhost",
    help="Name of this host: the RPC server name, the notification pool of the PXE filter, "
         "and the node reservation holder while the inspection service processes a node. "
         "Unique per process.")
state_path_opt = cfg.StrOpt(
    "state_path", default="/var/lib/ironic-inspection",
    help="Directory for the embedded SQLite database and other state; 'ironic-inspection "
         "dbsync' creates the database's directory (mode 0750) when missing.")

database_opts = [
    cfg.StrOpt("connection", secret=True,
               default="sqlite:///$state_path/inspection.sqlite",
               help="SQLAlchemy URL of the node/port database. Ironic's own database works "
                    "too (read-only for the PXE filter). Examples: "
                    "postgresql+psycopg2://user:pass@host/ironic, "
                    "mysql+pymysql://user:pass@host/ironic."),
    cfg.IntOpt("connect_timeout", default=10, min=1,
               help="Seconds to wait for the database to accept a connection."),
    cfg.IntOpt("statement_timeout", default=60, min=0,
               help="Seconds any one statement may run before the database cancels it "
                    "(PostgreSQL statement_timeout, MariaDB max_statement_time); 0 = no "
                    "limit. A frozen database then fails a sync or a request with a log "
                    "line instead of blocking it."),
    cfg.IntOpt("lock_timeout", default=30, min=1,
               help="Seconds a statement may wait for a lock (PostgreSQL lock_timeout, "
                    "MariaDB lock_wait_timeout and innodb_lock_wait_timeout, SQLite "
                    "busy_timeout)."),
]

discovery_enabled_opt = cfg.BoolOpt(
    "enabled", default=False, mutable=True,
    help="Enroll machines that are not known to the database when they boot the inspection "
         "ramdisk. Also makes the PXE filter serve unknown MACs: set it in the shared "
         "configuration file, which the filter and the inspection service both read.")

supported_inspect_interfaces_opt = cfg.ListOpt(
    "supported_inspect_interfaces", default=["agent"], mutable=True,
    help="Inspect interfaces whose nodes may PXE boot the inspection ramdisk: ports of nodes "
         "on inspection with one of these are allowed. The inspection service applies the "
         "same rule to the broadcasts it sends.")


def register_shared_opts(conf: cfg.ConfigOpts) -> None:
    """Register the shared options on ``conf`` (idempotent)."""
    conf.register_opts([host_opt, state_path_opt])
    conf.register_opts(database_opts, group="database")
    conf.register_opt(discovery_enabled_opt, group="auto_discovery")
    conf.register_opt(supported_inspect_interfaces_opt, group="pxe_filter")
