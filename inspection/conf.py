"""Configuration options of the inspection service (names follow Ironic's).

Options are registered on an explicit ``ConfigOpts`` so tests can build isolated
configurations; the console scripts use the global ``cfg.CONF`` because oslo.messaging reads
some of its own groups from there.
"""

from oslo_config import cfg

from pxe_filter.common import logs
from pxe_filter.common import options as shared

DEFAULT_HOOKS = "ramdisk-error,validate-interfaces,ports,architecture"

rbac_opts = [
    cfg.StrOpt("rbac_service_project_name", default="service",
               help="Project of the users whose 'service' role the policies' service_role "
                    "rule accepts ([api]auth_strategy = keystone), as in Ironic."),
    cfg.BoolOpt("rbac_service_role_elevated_access", default=False,
                help="Let users with the 'service' role in rbac_service_project_name act on "
                     "every node as system members do (the service_role rule), as in "
                     "Ironic."),
]

default_opts = [shared.host_opt, shared.state_path_opt, *rbac_opts]

database_opts = shared.database_opts

auto_discovery_opts = [
    shared.discovery_enabled_opt,
    cfg.StrOpt("driver", default="fake-hardware",
               help="Hardware type of auto-discovered nodes."),
    cfg.StrOpt("inspection_scope",
               help="Value of properties['inspection_scope'] on auto-discovered nodes, so that "
                    "scoped inspection rules can target them."),
]

inspector_opts = [
    cfg.StrOpt("default_hooks", default=DEFAULT_HOOKS,
               help="Hooks that every inspection runs, in order."),
    cfg.StrOpt("hooks", default="$default_hooks",
               help="Hooks to run, in order; '$default_hooks' expands, so "
                    "'pre,$default_hooks,post' adds hooks around the defaults."),
    cfg.StrOpt("add_ports", default="pxe", choices=["all", "active", "pxe", "disabled"],
               help="Which interfaces get ports: all, active (with an IP), pxe (the PXE "
                    "interface only) or disabled (none)."),
    cfg.StrOpt("keep_ports", default="all", choices=["all", "present", "added"],
               help="Which existing ports to keep: all, present (in the inventory) or added "
                    "(added by this inspection)."),
    cfg.BoolOpt("update_pxe_enabled", default=True,
                help="Update pxe_enabled of existing ports from the inventory."),
    cfg.BoolOpt("disk_partitioning_spacing", default=True,
                help="Leave 1 GiB for partitioning when computing local_gb."),
    cfg.DictOpt("cpu_capabilities",
                default={"vmx": "cpu_vt", "svm": "cpu_vt", "aes": "cpu_aes",
                         "pse": "cpu_hugepages", "pdpe1gb": "cpu_hugepages_1g",
                         "smx": "cpu_txt"},
                help="CPU flag to capability name."),
    cfg.MultiStrOpt("pci_device_alias", default=[],
                    help="JSON objects {vendor_id, product_id, name} counted into "
                         "capabilities."),
    cfg.ListOpt("physical_network_cidr_map", default=[],
                help="CIDR:physnet pairs; a port whose IP is in the CIDR gets that physical "
                     "network."),
    cfg.StrOpt("known_accelerators",
               help="YAML file listing known accelerator devices."),
    cfg.BoolOpt("extra_hardware_strict", default=False,
                help="Fail inspection when extra hardware data is malformed."),
    cfg.IntOpt("inspect_wait_timeout", default=1800, min=0,
               help="Seconds a node may stay in 'inspect wait' before inspection fails; "
                    "0 disables the timeout."),
    cfg.BoolOpt("power_off", default=True,
                help="Power off a node whose boot this service manages (hardware types "
                     "redfish and ipmi) when its inspection ends: processed, failed, "
                     "aborted or timed out."),
]

bmc_opts = [
    cfg.IntOpt("max_sessions", default=8, min=1,
               help="BMC sessions (Redfish or IPMI) this process opens at once; more work "
                    "waits for a free one, so inspecting many nodes together never opens "
                    "a session per node."),
    cfg.FloatOpt("call_timeout", default=10.0, min=0.1,
                 help="Seconds one BMC request may take (connecting and answering) before it "
                      "counts as failed."),
    cfg.IntOpt("call_retries", default=2, min=0,
               help="Retries of a BMC request that failed for a reason that may pass "
                    "(timeout, connection refused, server error); refused credentials are "
                    "never retried."),
    cfg.FloatOpt("retry_interval", default=1.0, min=0.0,
                 help="Seconds before the first retry of a BMC request; each further retry "
                      "waits twice as long."),
    cfg.IntOpt("power_state_change_timeout", default=60, min=1,
               help="Seconds a machine has to reach the requested power state (as Ironic's "
                    "[conductor]power_state_change_timeout); later, last_error says so."),
    cfg.FloatOpt("poll_interval", default=2.0, min=0.1,
                 help="Seconds between looks for pending BMC work (a verification, a boot "
                      "for inspection, a power change) and between power state reads while "
                      "a change is applied."),
    cfg.IntOpt("max_sessions_per_bmc", default=4, min=1,
               help="Sessions open at once to one BMC address (many nodes may share one, "
                    "e.g. a chassis manager); nodes beyond it wait for the next look, so "
                    "a slow or dead BMC holds at most this many of [bmc]max_sessions."),
]

inspection_rules_opts = [
    cfg.StrOpt("built_in_rules",
               help="YAML file of built-in inspection rules, loaded and validated at start."),
    cfg.StrOpt("default_scope",
               help="Scope given to rules created without one."),
    cfg.StrOpt("mask_secrets", default="always", choices=["always", "never", "sensitive"],
               help="Mask secrets in rule interpolation and logs: always, never, or only for "
                    "sensitive rules."),
    cfg.IntOpt("max_loop_items", default=10000, min=1,
               help="Most items a rule's loop may go over; more fails the inspection."),
    cfg.IntOpt("max_value_size", default=64 * 1024, min=1024,
               help="Largest value (bytes of JSON) one rule action may write."),
    cfg.IntOpt("max_node_size", default=1024 * 1024, min=4096,
               help="Most bytes of JSON rules may write per callback, and the largest "
                    "node (driver_info, properties, extra, instance_info) they may leave; "
                    "also the largest node or port the API creates or patches."),
    cfg.FloatOpt("max_seconds", default=5.0, min=0.1,
                 help="Longest time the rules of one callback may run (the early phase "
                      "counts on its own: it runs in the API request)."),
    cfg.ListOpt("supported_interfaces", default=["^(agent|inspector)$"],
                help="Inspect interfaces for which rules run: names or regular expressions "
                     "matched against the whole interface name ('.*' runs rules for every "
                     "node). The default limits rules to in-band inspection."),
]

api_opts = [
    cfg.HostAddressOpt("host_ip", default="127.0.0.1", help="Address the API listens on."),
    cfg.PortOpt("port", default=6385, help="Port the API listens on."),
    cfg.StrOpt("auth_strategy", default="noauth",
               choices=["noauth", "http_basic", "keystone"],
               help="Authentication of admin endpoints. noauth (the default, so that a "
                    "fresh install answers on 127.0.0.1) is refused on any address that is "
                    "not loopback unless allow_insecure_noauth is set: switch to http_basic "
                    "before listening on the provisioning network. keystone checks Keystone "
                    "tokens ([keystone_authtoken]) and authorises with the policies "
                    "([oslo_policy]), as Ironic does."),
    cfg.StrOpt("http_basic_auth_user_file", default="/etc/ironic-inspection/htpasswd",
               help="htpasswd file (bcrypt) for http_basic."),
    cfg.IntOpt("max_request_body_size", default=4 * 1024 * 1024, min=1024,
               help="Largest request body in bytes; larger requests get 413. The ramdisk's "
                    "inspection data is usually well below 1 MiB."),
    cfg.IntOpt("max_callback_interfaces", default=128, min=1,
               help="Most network interface records one ramdisk callback may list; more get "
                    "400. The largest servers have a few dozen ports (eight 4-port cards "
                    "and the onboard ones), VLAN interfaces included; every MAC costs a "
                    "lookup, and with auto-discovery a port and a filter file."),
    cfg.FloatOpt("callback_rate", default=1.0, min=0,
                 help="Ramdisk callbacks a second one client address may send in the long "
                      "run (IPv6: one /64); beyond it and callback_burst, 429 with "
                      "Retry-After. A machine posts once per inspection. 0 turns the limit "
                      "off (e.g. behind a proxy that does not pass the client address)."),
    cfg.IntOpt("callback_burst", default=50, min=1,
               help="Ramdisk callbacks one client address may send at once before "
                    "callback_rate applies (room for a relay or NAT before a few dozen "
                    "machines)."),
    cfg.BoolOpt("allow_insecure_noauth", default=False,
                help="Let auth_strategy = noauth listen on a non-loopback address (anyone "
                     "who reaches the port can then change nodes and rules)."),
    cfg.IntOpt("auth_max_failures", default=10, min=1,
               help="Failed logins as one user name from one client address (IPv6: its "
                    "/64) within auth_failure_window after which that user's logins from "
                    "that address are refused (429, without a password check) until the "
                    "window ends. Other users at that address, and that user elsewhere, "
                    "are not refused."),
    cfg.IntOpt("auth_failure_window", default=60, min=1,
               help="Seconds over which failed logins are counted per user name and client "
                    "address, from the first failure."),
    cfg.IntOpt("auth_concurrency", min=1, sample_default="half the CPUs, at least 1",
               help="Password checks (bcrypt) run at once, so that guessers never hold "
                    "the CPUs the ramdisk callback needs; more wait in auth_queue_length. "
                    "Unset: half the CPUs, at least 1."),
    cfg.IntOpt("auth_queue_length", default=2, min=0,
               help="Password checks that may wait for one of auth_concurrency, at most "
                    "one per client address. They are served by priority: first the user "
                    "name and address with the fewest failed or refused checks lately (none "
                    "goes before any), then the address with the fewest, then the user "
                    "name; a refused check retried with the same password counts once. A "
                    "check that finds the queue full of better or equal ones gets 429; a "
                    "better one pushes out the worst waiting one (429). auth_concurrency + "
                    "auth_queue_length must stay at most threads - 2, so that waiting checks "
                    "never hold the threads the ramdisk callback needs."),
    cfg.IntOpt("auth_queue_timeout", default=10, min=1,
               help="Seconds a password check waits in the queue before it gets 429."),
    cfg.IntOpt("threads", default=8, min=1,
               help="Request threads of the WSGI server."),
    cfg.IntOpt("connection_limit", default=1000, min=10,
               help="Open client connections the WSGI server accepts; beyond it new clients "
                    "wait. A batch of machines booting at once each holds one."),
    cfg.IntOpt("channel_timeout", default=30, min=1,
               help="Seconds an idle keep-alive connection stays open."),
    cfg.IntOpt("connections_per_client", default=50, min=0,
               help="Open connections one client address may hold; its further ones are "
                    "closed at once, so that one client cannot take the connection_limit "
                    "the machines booting need. 0: no limit (behind a proxy, where every "
                    "connection comes from the proxy, set it above the proxy's own)."),
    cfg.IntOpt("connection_reserve", default=100, min=0,
               help="The last connections of connection_limit, kept for light clients: "
                    "once connection_limit - connection_reserve are open, a client (an "
                    "address, or an IPv6 /64) holding a tenth of connections_per_client or "
                    "more gets no new one, so that the ramdisk callback and an admin still "
                    "get in while slow clients hold the rest. With the defaults (1000, 100, "
                    "50), 18 clients of 50 slow connections fill the rest and each further "
                    "client holds at most 5 of the reserve: the reserve stays open to others "
                    "until about 38 such clients at once. Not applied when "
                    "connections_per_client is 0."),
    cfg.IntOpt("request_deadline", default=60, min=1,
               help="Seconds within which a request's headers and body must arrive, from "
                    "its first byte; a connection still sending after that is closed (a "
                    "client trickling a header line every few seconds is never idle, so "
                    "channel_timeout alone does not close it)."),
    cfg.IntOpt("processing_threads", default=4, min=1,
               help="Threads processing inspection data in-process (all-in-one mode, "
                    "[DEFAULT]transport_url unset)."),
    cfg.IntOpt("max_limit", default=1000, min=1,
               help="Most items one list request returns (as Ironic's [api]max_limit); a "
                    "longer list ends with a 'next' link to the following page."),
    cfg.IntOpt("max_page_bytes", default=8 * 1024 * 1024, min=0,
               help="Bytes of stored text (JSON fields, strings) one list page of nodes or "
                    "ports may hold: a page ends earlier, with its 'next' link, once the "
                    "next item would take it over (a page holds at least one item). Bounds "
                    "the API's memory for pages of large nodes. 0: no bound."),
    cfg.URIOpt("public_endpoint", schemes=["http", "https"],
               help="Base URL clients reach the API at, for the links in answers (version "
                    "documents, self links, next pages, Location), as Ironic's "
                    "[api]public_endpoint; e.g. https://bmaas.example.com:6385 behind a "
                    "proxy. Default: the URL of each request."),
]

healthcheck_opts = [
    cfg.BoolOpt("enabled", default=True,
                help="Serve /healthcheck without authentication for load balancers "
                     "(oslo.middleware's healthcheck; the other [healthcheck] options say "
                     "what it checks and shows). Ironic has the option too, off by default."),
]

worker_opts = [
    cfg.PortOpt("prometheus_port", default=0,
                help="Port on which ironic-inspection-worker serves Prometheus metrics (GET "
                     "/metrics, names ironic_inspection_*); 0 serves none."),
    cfg.HostAddressOpt("prometheus_host", default="127.0.0.1",
                       help="Address the worker's metrics port listens on. The metrics need "
                            "no login: keep them on a trusted address."),
]

processing_opts = [
    cfg.IntOpt("heartbeat_interval", default=10, min=1,
               help="Seconds between the heartbeats that each worker (and the API "
                    "all-in-one) writes to the database; also how often each looks for "
                    "accepted callbacks whose wake-up was lost."),
    cfg.IntOpt("heartbeat_timeout", default=30, min=2,
               help="Seconds without a heartbeat after which a process is dead: the others "
                    "take over the callbacks it was processing and release its node "
                    "reservations. At least twice heartbeat_interval; the takeover happens "
                    "within heartbeat_timeout + heartbeat_interval of a crash."),
    cfg.IntOpt("max_pending_callbacks", default=2000, min=1,
               help="Most accepted callbacks waiting to be processed (by any process); "
                    "beyond it the ramdisk callback answers 503 with Retry-After before "
                    "storing anything, and the ramdisk retries. Room for a few large "
                    "racks booting at once."),
    cfg.IntOpt("max_pending_bytes", default=512 * 1024 * 1024, min=1024 * 1024,
               help="Most bytes (JSON) of accepted callbacks waiting to be processed; "
                    "beyond it the ramdisk callback answers 503 with Retry-After. Keep it "
                    "well below the database's free disk space."),
    cfg.IntOpt("max_attempts", default=3, min=1,
               help="Times the processing of one accepted callback may be interrupted (its "
                    "process dies or fails unexpectedly) before the inspection fails instead "
                    "of killing the next process."),
]


#: Ironic's [redfish] hook options, for ``inspect_interface = redfish`` (out-of-band).
redfish_opts = [
    cfg.StrOpt("default_inspection_hooks", default="validate-interfaces,ports,architecture",
               help="Hooks run by default on inventories read from the BMC (out-of-band "
                    "inspection): they validate the interfaces, create ports and set "
                    "cpu_arch."),
    cfg.StrOpt("inspection_hooks", default="$default_inspection_hooks",
               help="Hooks run on inventories read from the BMC, in order; "
                    "$default_inspection_hooks expands to the default list. Hooks that "
                    "need data only the ramdisk sends are skipped with a log line."),
]


def check_processing_opts(conf: cfg.ConfigOpts) -> None:
    """Raise ValueError if the heartbeat timeout leaves no room for a late heartbeat."""
    group = conf.processing
    if group.heartbeat_timeout < 2 * group.heartbeat_interval:
        raise ValueError(f"[processing]heartbeat_timeout ({group.heartbeat_timeout}) must be "
                         f"at least twice heartbeat_interval ({group.heartbeat_interval}), "
                         f"or a busy but live process is judged dead")


#: Ironic's version headers, which browsers may send and read (Ironic's CORS defaults).
VERSION_HEADERS = ["X-OpenStack-Ironic-API-Version", "X-OpenStack-Ironic-API-Minimum-Version",
                   "X-OpenStack-Ironic-API-Maximum-Version"]


def set_defaults() -> None:
    """Our defaults of library options: oslo.log's, and Ironic's for CORS (idempotent)."""
    # Imported here: the filter reads this module's option names (its unknown-option check)
    # and needs none of oslo.middleware's weight for that.
    from oslo_middleware import cors  # noqa: PLC0415

    logs.set_defaults()
    cors.set_defaults(allow_methods=["GET", "PUT", "POST", "DELETE", "PATCH"],
                      expose_headers=VERSION_HEADERS)


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register every inspection option group on ``conf`` (idempotent)."""
    conf.register_opts(default_opts)
    conf.register_opts(database_opts, group="database")
    conf.register_opts(auto_discovery_opts, group="auto_discovery")
    conf.register_opts(inspector_opts, group="inspector")
    conf.register_opts(inspection_rules_opts, group="inspection_rules")
    conf.register_opts(api_opts, group="api")
    conf.register_opts(healthcheck_opts, group="healthcheck")
    conf.register_opts(worker_opts, group="worker")
    conf.register_opts(processing_opts, group="processing")
    conf.register_opts(bmc_opts, group="bmc")
    conf.register_opts(redfish_opts, group="redfish")
    shared.register_shared_opts(conf)


def list_opts() -> list[tuple[str | None, list[cfg.Opt]]]:
    """Options for oslo-config-generator and docs."""
    return [
        ("DEFAULT", default_opts),
        ("database", database_opts),
        ("auto_discovery", auto_discovery_opts),
        ("inspector", inspector_opts),
        ("inspection_rules", inspection_rules_opts),
        ("api", api_opts),
        ("healthcheck", healthcheck_opts),
        ("worker", worker_opts),
        ("processing", processing_opts),
        ("bmc", bmc_opts),
        ("redfish", redfish_opts),
        ("pxe_filter", [shared.supported_inspect_interfaces_opt]),
    ]
