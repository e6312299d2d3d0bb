"""Options of the ironic-pxe-filter daemon (names follow Ironic's ``[pxe_filter]`` group).

Options re-read on SIGHUP are marked ``mutable``; the others need a restart.
"""

from oslo_config import cfg, types

from pxe_filter import policy
from pxe_filter.common import options as shared
from pxe_filter.dnsmasq import options as dnsmasq_options

GROUP = "pxe_filter"

#: Ironic's names (and our two placeholders), never a quote or backslash: the scope is
#: rendered into the sync's SQL.
_NAME = types.String(regex=r"^[^'\"\\\s]+$")

pxe_filter_opts = [
    cfg.StrOpt("dhcp_hostsdir", default="/var/lib/ironic-pxe-filter/hostsdir",
               help="Directory that dnsmasq reads with --dhcp-hostsdir. Created at start "
                    "(mode 0755, dnsmasq reads it) when missing and the daemon may; it must "
                    "be writable. The daemon writes one file per MAC in it and never "
                    "deletes or recreates the directory."),
    cfg.IntOpt("sync_period", default=45, min=0, mutable=True,
               help="Seconds between full synchronisations with the database; 0 disables "
                    "the periodic sync (broadcasts and SIGHUP still apply)."),
    cfg.FloatOpt("poll_interval", default=1.0, min=0, mutable=True,
                 help="Seconds between polls of the database for changed nodes and ports: a "
                      "cheap per-table statistic first (PostgreSQL pg_stat_user_tables, "
                      "MariaDB UPDATE_TIME, SQLite the file's time), then, only when it "
                      "moved, the rows whose updated_at or created_at is recent. Changes "
                      "then reach the files within seconds with no broadcast or "
                      "notification (Ironic with JSON-RPC). 0 disables polling."),
    cfg.IntOpt("poll_margin", default=10, min=0, mutable=True,
               help="Seconds a poll reaches back before the previous one: more than the "
                    "clock skew between Ironic's conductors and this host (updated_at "
                    "comes from the writer's clock), plus one for MariaDB's whole-second "
                    "timestamps and the time a write takes to commit."),
    shared.supported_inspect_interfaces_opt,
    cfg.BoolOpt("deny_unknown_macs", default=False, mutable=True,
                help="Always refuse MACs that match no port, even during inspection or with "
                     "auto-discovery enabled (which then cannot work)."),
    cfg.IntOpt("database_outage_deny_unknown", default=300, min=0, mutable=True,
               help="Seconds the database may leave a read unanswered (refused, failing or "
                    "hung) before MACs of no port are denied until it answers again, "
                    "whatever the policy said before: no inspection may end unseen while "
                    "unknown machines stay served. Counted on its own clock from the first "
                    "unanswered read. MACs with a port keep their last verdict and denies "
                    "still apply; auto-discovery of new machines stops meanwhile. 0 never "
                    "closes them."),
    cfg.FloatOpt("database_read_timeout", default=10.0, min=0.5, mutable=True,
                 help="Seconds one read of the database (a full sync's or a lookup's) may "
                      "take before its connection is cut and the read counts as failed, "
                      "whatever the server does (a frozen server never answers; its "
                      "kernel keeps the connection open)."),
    cfg.BoolOpt("purge_stale_files", default=False, mutable=True,
                help="Delete the files of MACs that no port has any more. Each deletion is "
                     "followed at once by a dnsmasq reload (dnsmasq forgets a deleted file "
                     "only on SIGHUP), so it needs [dnsmasq]control; without one it is "
                     "ignored with a warning."),
    cfg.ListOpt("conductor_groups", default=[], mutable=True, item_type=_NAME,
                help="Serve only nodes of these Ironic conductor groups (one filter per "
                     "provisioning network); empty serves every group. Write "
                     f"'{policy.DEFAULT_GROUP}' for the default group (Ironic's ''). Names "
                     "are compared lower-case, as Ironic stores them. A node outside the "
                     "scope is never allowed, whatever a sync, a broadcast or a notification "
                     "says; see out_of_scope for its ports."),
    cfg.ListOpt("shards", default=[], mutable=True, item_type=_NAME,
                help="Serve only nodes of these Ironic shards; empty serves every shard. "
                     f"Write '{policy.NO_SHARD}' for nodes without a shard. With "
                     "conductor_groups too, a node must match both."),
    cfg.StrOpt("out_of_scope", default=policy.OUT_OF_SCOPE_DENY, mutable=True,
               choices=[(policy.OUT_OF_SCOPE_DENY,
                         "every port of an out-of-scope node gets a deny file (safe: "
                         "dnsmasq never answers those machines); each sync reads every port"),
                        (policy.OUT_OF_SCOPE_WILDCARD,
                         "out-of-scope nodes' ports get no file and follow the unknown-MAC "
                         "wildcard; a sync reads only in-scope nodes' ports. Safe only when "
                         "this dnsmasq's network never sees other groups' machines, or with "
                         "deny_unknown_macs = true: while discovery is on or an in-scope node "
                         "is on inspection, the wildcard serves them")],
               help="What the ports of nodes outside conductor_groups/shards get. Unused "
                    "without a scope."),
    cfg.BoolOpt("ironic_notifications", default=False,
                help="Follow Ironic's versioned notifications (Ironic: [DEFAULT]"
                     "notification_level = info, [oslo_messaging_notifications]driver = "
                     "messagingv2): every node or port change applies within milliseconds "
                     "instead of at the next sync. Reads from [oslo_messaging_notifications]"
                     "transport_url, else [DEFAULT]transport_url (RabbitMQ)."),
    cfg.ListOpt("notification_topics", default=["ironic_versioned_notifications"],
                help="Ironic's versioned notification topics (Ironic: "
                     "[oslo_messaging_notifications]versioned_notifications_topics)."),
    cfg.IntOpt("notification_queue_expires", default=600, min=5,
               help="Seconds after which RabbitMQ deletes this daemon's notification queue "
                    "once nothing consumes it (a stopped daemon leaves nothing that grows)."),
    cfg.IntOpt("notification_queue_max_length", default=10000, min=100,
               help="Most notifications the queue keeps while the daemon is away; older ones "
                    "are dropped (the first sync after a restart covers them)."),
    cfg.StrOpt("state_file",
               help="Where the daemon writes its figures (JSON, atomically) after every "
                    "sync, broadcast and repair; read by 'ironic-pxe-filter status'. "
                    "Default: .ironic-pxe-filter.status.json in the hostsdir (dnsmasq "
                    "ignores dotfiles); in the hostsdir, only a dotfile is accepted."),
    cfg.PortOpt("prometheus_port", default=0,
                help="Port on which the daemon serves Prometheus metrics (GET /metrics, "
                     "names ironic_pxe_filter_*); 0 serves none."),
    cfg.HostAddressOpt("prometheus_host", default="127.0.0.1",
                       help="Address the metrics port listens on. The metrics need no "
                            "login: keep them on a trusted address."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the daemon's options and the shared ones it reads on ``conf``."""
    shared.register_shared_opts(conf)
    conf.register_opts(pxe_filter_opts, group=GROUP)
    dnsmasq_options.register_opts(conf)


def list_opts() -> list[tuple[str | None, list[cfg.Opt]]]:
    """Options the daemon reads, for --help, docs and oslo-config-generator."""
    return [
        ("DEFAULT", [shared.host_opt, shared.state_path_opt]),
        ("database", shared.database_opts),
        ("auto_discovery", [shared.discovery_enabled_opt]),
        (GROUP, pxe_filter_opts),
        (dnsmasq_options.GROUP, dnsmasq_options.control_opts),
    ]


def list_sample_opts() -> list[tuple[str | None, list[cfg.Opt]]]:
    """Every option of the ironic-pxe-filter commands (the daemon's and all of [dnsmasq],
    which render-dnsmasq-config reads), for oslo-config-generator."""
    groups = [(group, opts) for group, opts in list_opts() if group != dnsmasq_options.GROUP]
    return groups + dnsmasq_options.list_opts()

