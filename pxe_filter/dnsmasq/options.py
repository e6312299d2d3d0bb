"""The ``[dnsmasq]`` options: what the rendered dnsmasq configuration is made of.

dnsmasq reads one option per line and splits values on commas, so a value carrying a newline,
a comma or a ``#`` could add options of its own: each value's type checks it against what it
must be (a name, a path, a URL) with an allow-list of characters, and says what was expected.
:func:`pxe_filter.dnsmasq.settings.from_conf` reads every option, so an operator sees every
mistake at once, and adds the rules between options.
"""

from oslo_config import cfg, types

GROUP = "dnsmasq"


def show(value: object) -> str:
    """``repr(value)``, cut to 80 characters."""
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


class Checked(types.String):
    """A string matching ``pattern`` in full (or empty, unless ``required``) with no control
    character; an error says what was expected, so the operator reads the rule, not a regex."""

    def __init__(self, pattern: str, what: str, required: bool = False) -> None:
        super().__init__(regex=rf"\A(?:{pattern}){'' if required else '?'}\Z")
        self.what = what

    def __call__(self, value: object) -> str:
        """The value, or ValueError naming it and what it must be."""
        if any(ord(c) < 32 or ord(c) == 127 for c in str(value)):
            raise ValueError(f"{show(value)} contains a newline or another control character")
        try:
            return super().__call__(value)
        except ValueError:
            raise ValueError(f"expected {self.what}, not {show(value)}") from None


PATH = r"/[A-Za-z0-9_./@+=~%:-]*"
_PATH = Checked(PATH, "an absolute path of letters, digits and _ . / @ + = ~ % : - (no "
                      "spaces, commas or '#')")
_BOOTFILE = Checked(r"[A-Za-z0-9_./@+=~%:-]{1,127}", "a boot file name of at most 127 "
                                                     "letters, digits and _ . / @ + = ~ % : -")
#: For values parsed in settings.py: only control characters are refused here.
TEXT = Checked(".*", "text")


def _url(*schemes: str) -> Checked:
    # RFC 3986 characters minus ',' (dnsmasq's separator), '#' (comment), quotes and '\'.
    chars = r"[A-Za-z0-9\-._~:/?\[\]@!&()*+;=%$]"
    host = chars.replace("/?", "")  # up to the first "/" or "?"
    return Checked(rf"(?=.{{1,255}}\Z)(?i:{'|'.join(schemes)})://{host}+(?:[/?]{chars}*)?",
                   f"a URL starting with {' or '.join(schemes)}://host, of at most 255 "
                   "characters without spaces, commas, quotes or '#'")


_FACILITIES = "|".join(["kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news",
                        "uucp", "cron", "authpriv", "ftp", "local[0-7]"])
_IFNAME = Checked(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,14}",  # IFNAMSIZ is 16 with the NUL
                  "an interface name (up to 15 letters, digits, '_', '.', '@' or '-')")
_USER = Checked(r"[a-z_][a-z0-9_-]{0,31}", "a user name (lower-case letters, digits, '_', '-')")
_LEASE_TIME = Checked(r"[0-9]{1,9}[smhdw]?|infinite", "seconds, a number with s/m/h/d/w "
                      "(e.g. 10m), or 'infinite'", required=True)
_FACILITY = Checked(rf"-|{PATH}|(?i:{_FACILITIES})", "a syslog facility (daemon, local0...), '-' "
                    "or an absolute file path of letters, digits and _ . / @ + = ~ % : -")
_WEB_URL, _V6_URL = _url("http", "https"), _url("tftp", "http", "https")

dnsmasq_opts = [
    cfg.Opt("config_file", type=_PATH, default="/var/lib/ironic-pxe-filter/dnsmasq.conf",
            help="Where the rendered dnsmasq configuration is installed (atomically, mode "
                 "0644, only after 'dnsmasq --test' accepted it). The dnsmasq unit reads it."),
    cfg.StrOpt("template",
               help="Jinja2 template to render instead of the shipped dnsmasq.conf.j2."),
    cfg.StrOpt("binary", default="dnsmasq",
               help="dnsmasq executable used for 'dnsmasq --test' (searched in PATH, then "
                    "/usr/sbin and /sbin, unless absolute)."),
    cfg.StrOpt("mode", default="interface", choices=["interface", "relay"],
               help="interface: serve the subnet of a local interface. relay: serve only "
                    "requests forwarded by DHCP relays (spine/leaf); every range needs a "
                    "netmask."),
    cfg.Opt("interface", type=_IFNAME,
            help="Interface dnsmasq listens on. Required in interface mode; in relay mode "
                 "optional (dnsmasq then listens on every interface)."),
    cfg.MultiStrOpt("dhcp_ranges", default=[],
                    help="IPv4 range 'start,end[,netmask][,tag]'; repeat the option for "
                         "several ranges (one per relayed leaf). A tag is set on the clients of "
                         "the range (set:TAG), shown by log-dhcp and usable in a custom "
                         "template. At least one range is required. Example: "
                         "192.0.2.100,192.0.2.200,255.255.255.0,leaf1"),
    cfg.Opt("dhcp_range_v6", type=TEXT,
            help="Optional DHCPv6 range 'start,end[,prefix-length]' (prefix 64 to 128, "
                 "default 64). Clients also need router advertisements with the M flag."),
    cfg.Opt("lease_time", type=_LEASE_TIME, default="10m",
            help="Lease time: seconds, or a number with s/m/h/d/w, or 'infinite'; at "
                 "least 2 minutes."),
    cfg.BoolOpt("sequential_ip", default=True,
                help="Hand out addresses in order (dhcp-sequential-ip) rather than hashed "
                     "from the MAC."),
    cfg.BoolOpt("no_ping", default=False,
                help="Do not ping an address before offering it (saves about 3 s per new "
                     "lease; only safe when nothing else uses the range)."),
    cfg.Opt("bios_bootfile", type=_BOOTFILE, default="undionly.kpxe",
            help="Boot file for legacy BIOS PXE clients (client arch 0). Empty: none."),
    cfg.Opt("uefi_bootfile", type=_BOOTFILE, default="snponly.efi",
            help="Boot file for x86-64 UEFI PXE clients (client arch 7 and 9). Empty: none."),
    cfg.Opt("uefi_arm64_bootfile", type=_BOOTFILE,
            help="Boot file for arm64 UEFI PXE clients (client arch 11). Unset: none."),
    cfg.Opt("ipxe_script_url", type=_WEB_URL,
            help="iPXE chaining: clients whose user class is 'iPXE' get this script URL, "
                 "the others get the BIOS/UEFI boot file above (normally an iPXE build)."),
    cfg.Opt("ipv6_ipxe_script_url", type=_WEB_URL,
            help="iPXE chaining over DHCPv6: the script URL iPXE clients get in "
                 "option6:bootfile-url, reachable over IPv6 (e.g. http://[2001:db8::1]/"
                 "boot.ipxe). Unset: ipxe_script_url, which an IPv6-only client cannot "
                 "reach when it names an IPv4 address."),
    cfg.Opt("http_boot_url", type=_WEB_URL,
            help="Boot URL for x86-64 UEFI HTTP boot clients (client arch 16)."),
    cfg.Opt("tftp_root", type=_PATH,
            help="Serve TFTP from this directory (enable-tftp). Unset: boot files come "
                 "from tftp_server or another TFTP server on this host."),
    cfg.StrOpt("tftp_server",
               help="IPv4 address of another TFTP server (next-server) for the boot files."),
    cfg.Opt("ipv6_bootfile_url", type=_V6_URL,
            help="DHCPv6 boot file URL (option6:bootfile-url) for x86-64 UEFI clients "
                 "(client arch 7 or 9 in DHCPv6 option 61) that are not iPXE."),
    cfg.Opt("ipv6_arm64_bootfile_url", type=_V6_URL,
            help="DHCPv6 boot file URL for arm64 UEFI clients (client arch 11 in DHCPv6 "
                 "option 61) that are not iPXE. Unset: none."),
    cfg.Opt("leasefile", type=_PATH,
            default="/var/lib/ironic-inspection-dnsmasq/dnsmasq.leases",
            help="dnsmasq's lease database."),
    cfg.Opt("pid_file", type=_PATH, default="/run/ironic-inspection-dnsmasq/dnsmasq.pid",
            help="dnsmasq's pid file; empty: none."),
    cfg.Opt("lease_report_dir", type=_PATH, default="/var/lib/ironic-pxe-filter/leases",
            help="Directory where dnsmasq reports every lease it grants to "
                 "ironic-pxe-filter (through a dhcp-script written beside config_file), "
                 "so a lease to a MAC the database denies is caught, logged at CRITICAL "
                 "and closed. dnsmasq must be able to write in it and the daemon to "
                 "read and delete there (share it with a dnsmasq container). Empty: no "
                 "reports."),
    cfg.BoolOpt("log_dhcp", default=True,
                help="Log every DHCP exchange (log-dhcp): useful to see why a MAC is refused."),
    cfg.Opt("log_facility", type=_FACILITY,
            help="Syslog facility (e.g. DAEMON, LOCAL0), an absolute log file, or '-' for "
                 "stderr. Unset: syslog facility DAEMON."),
    cfg.Opt("user", type=_USER,
            help="User dnsmasq drops privileges to. Unset: dnsmasq's built-in default."),
]

#: How the daemon starts, reloads (SIGHUP) and restarts dnsmasq; read by the daemon only.
control_opts = [
    cfg.StrOpt("control", default="none", choices=["none", "pidfile", "systemd", "commands"],
               help="How ironic-pxe-filter drives dnsmasq. none: it does not (threshold "
                    "reloads and purging are off; a replaced hostsdir makes the daemon exit "
                    "1 so systemd restarts both units). pidfile: start dnsmasq with "
                    "start_command (default: '<binary> --conf-file=<config_file>', which "
                    "daemonises) unless the process in pid_file runs, SIGHUP it after the "
                    "first sync; it keeps running when the daemon stops. systemd: 'systemctl "
                    "--no-block' reload-or-restart/restart of systemd_unit. commands: run "
                    "start_command in the foreground as a child, restart it when it exits, "
                    "stop it when the daemon stops."),
    cfg.StrOpt("systemd_unit", default="ironic-inspection-dnsmasq.service",
               help="The dnsmasq unit driven with control = systemd."),
    cfg.StrOpt("start_command",
               help="Command line that starts dnsmasq (split like a shell would, not run by "
                    "one). Required with control = commands, where it must stay in the "
                    "foreground (e.g. 'dnsmasq --keep-in-foreground --conf-file=...')."),
    cfg.StrOpt("reload_command",
               help="Command that makes dnsmasq re-read the hostsdir. Unset: SIGHUP to the "
                    "process (commands: the child; pidfile: the pid in pid_file)."),
    cfg.StrOpt("stop_command",
               help="Command that stops dnsmasq (control = commands). Unset: SIGTERM to the "
                    "child, SIGKILL after 5 s."),
    cfg.IntOpt("reload_threshold", default=1000, min=1, max=16000,
               help="SIGHUP dnsmasq after a sync, broadcast or repair that rewrote more "
                    "files than this: dnsmasq's inotify queue holds 16384 events and loses "
                    "changes silently beyond it (every rewrite costs dnsmasq several "
                    "events). Needs a control other than none."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register the ``[dnsmasq]`` options on ``conf`` (idempotent)."""
    conf.register_opts(dnsmasq_opts, group=GROUP)
    conf.register_opts(control_opts, group=GROUP)


def list_opts() -> list[tuple[str | None, list[cfg.Opt]]]:
    """Options for oslo-config-generator and docs."""
    return [(GROUP, [*dnsmasq_opts, *control_opts])]
