"""Validated ``[dnsmasq]`` settings: every value checked before it can reach the config file.

dnsmasq reads one option per line and splits values on commas, so a value carrying a newline,
a comma or a ``#`` could add options of its own. Each value is therefore checked against what
it must be (an address, a name, a path, a URL) with an allow-list of characters, and all the
problems are reported together, each naming its option and value.
"""

import contextlib
import ipaddress
import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from oslo_config import cfg

from pxe_filter.dnsmasq import options


class DnsmasqConfigError(Exception):
    """The dnsmasq configuration cannot be produced; the message says what to fix."""


class InvalidSettings(DnsmasqConfigError):
    """One or more ``[dnsmasq]`` values are invalid."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid dnsmasq settings:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class DhcpRange:
    """One IPv4 range; ``netmask`` is required for relayed (non-local) ranges."""

    start: str
    end: str
    netmask: str | None = None
    tag: str | None = None


@dataclass(frozen=True)
class Dhcp6Range:
    """The optional DHCPv6 range."""

    start: str
    end: str
    prefix_len: int = 64


@dataclass(frozen=True)
class DnsmasqSettings:
    """Everything the template needs, already validated."""

    mode: str
    interface: str | None
    ranges: tuple[DhcpRange, ...]
    range_v6: Dhcp6Range | None
    lease_time: str
    sequential_ip: bool
    no_ping: bool
    bios_bootfile: str | None
    uefi_bootfile: str | None
    uefi_arm64_bootfile: str | None
    ipxe_script_url: str | None
    ipv6_ipxe_script_url: str | None
    http_boot_url: str | None
    tftp_root: str | None
    tftp_server: str | None
    ipv6_bootfile_url: str | None
    ipv6_arm64_bootfile_url: str | None
    hostsdir: str
    leasefile: str
    pid_file: str | None
    log_dhcp: bool
    log_facility: str | None
    user: str | None
    #: Where dnsmasq's lease reports go and the dhcp-script writing them (None: no reports).
    lease_report_dir: str | None = None
    lease_script: str | None = None


#: The dhcp-script that reports leases, written beside [dnsmasq]config_file.
LEASE_SCRIPT = "dnsmasq-lease-report"
# Tags the template sets itself; a range tag with one of these names would change boot files.
RESERVED_TAGS = frozenset({"ipxe", "bios", "efi32", "efi64", "efiarm64", "httpboot", "known"})
_TAG = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
_IFNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,14}")  # IFNAMSIZ is 16 with the NUL
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_PATH = re.compile(r"/[A-Za-z0-9_./@+=~%:-]*")
_BOOTFILE = re.compile(r"[A-Za-z0-9_./@+=~%:-]{1,127}")
# RFC 3986 characters minus ',' (dnsmasq's separator), '#' (comment), quotes and '\'.
_URL = re.compile(r"[A-Za-z0-9\-._~:/?\[\]@!&()*+;=%$]{1,255}")
_LEASE = re.compile(r"(\d{1,9})([smhdw]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_BOOTFILES = ("bios_bootfile", "uefi_bootfile", "uefi_arm64_bootfile")
#: The URLs only DHCPv6 clients get, and the schemes each accepts.
_V6_SCHEMES = {"ipv6_bootfile_url": ("tftp", "http", "https"),
               "ipv6_arm64_bootfile_url": ("tftp", "http", "https"),
               "ipv6_ipxe_script_url": ("http", "https")}
_FACILITIES = frozenset(
    ["kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
     "authpriv", "ftp"] + [f"local{i}" for i in range(8)])


def _show(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


class _Checker:
    """Collects problems while converting raw option values."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self.problems: list[str] = []

    def fail(self, name: str, value: object, why: str) -> None:
        problem = f"[dnsmasq]{name} = {_show(value)}: {why}"
        if problem not in self.problems:  # an option may be read twice
            self.problems.append(problem)

    def raw(self, name: str) -> object:
        try:
            return getattr(self.conf.dnsmasq, name)
        except (cfg.Error, ValueError) as exc:  # e.g. a value outside 'choices'
            # oslo.config prefixes the useful part with the option's location object.
            self.problems.append(f"[dnsmasq]{name}: {str(exc).split(' is not valid: ')[-1]}")
            return None

    def text(self, name: str, value: object = None) -> str | None:
        """The option as a stripped string (None if unset or empty), refusing control chars."""
        value = self.raw(name) if value is None else value
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(name, value, "expected a string")
            return None
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            self.fail(name, value, "contains a newline or another control character")
            return None
        return value.strip() or None

    def match(self, name: str, pattern: re.Pattern[str], what: str) -> str | None:
        value = self.text(name)
        if value is not None and not pattern.fullmatch(value):
            self.fail(name, value, f"expected {what}")
            return None
        return value

    def path(self, name: str) -> str | None:
        return self.match(name, _PATH, "an absolute path of letters, digits and _ . / @ + = ~ "
                                       "% : - (no spaces, commas or '#')")

    def bootfile(self, name: str) -> str | None:
        return self.match(name, _BOOTFILE, "a boot file name of at most 127 letters, digits "
                                           "and _ . / @ + = ~ % : -")

    def url(self, name: str, schemes: tuple[str, ...] = ("http", "https")) -> str | None:
        value = self.match(name, _URL, "a URL of at most 255 characters without spaces, "
                                       "commas, quotes or '#'")
        parts = urlsplit(value or "")
        if value is not None and (parts.scheme not in schemes or not parts.netloc):
            self.fail(name, value, f"expected a URL starting with {' or '.join(schemes)}://host")
            return None
        return value

    def ip(self, name: str, value: str, version: int, shown: str | None = None) -> str | None:
        with contextlib.suppress(ValueError):
            if (address := ipaddress.ip_address(value)).version == version:
                return str(address)
        self.fail(name, shown or value, f"{value!r} is not an IPv{version} address")
        return None


def _parse_range(check: _Checker, value: object, relay: bool) -> DhcpRange | None:
    name = "dhcp_ranges"
    text = check.text(name, value)
    if text is None:
        check.fail(name, value, "empty range")
        return None
    parts = [p.strip() for p in text.split(",")]
    netmask = parts.pop(2) if len(parts) > 2 and re.fullmatch(r"[0-9.]+", parts[2]) else None
    tag = parts.pop(2) if len(parts) > 2 else None
    if len(parts) != 2:
        check.fail(name, text, "expected 'start,end[,netmask][,tag]'")
        return None
    start, end = parts
    before = len(check.problems)
    first, last = check.ip(name, start, 4, text), check.ip(name, end, 4, text)
    network = None
    if netmask is not None:
        try:
            network = ipaddress.IPv4Network(f"{start}/{netmask}", strict=False)
            if network.prefixlen > 30:
                check.fail(name, text, f"netmask {netmask} leaves no room for hosts")
        except ValueError:
            check.fail(name, text, f"{netmask!r} is not a netmask such as 255.255.255.0")
    elif relay:
        check.fail(name, text, "relay mode needs a netmask: 'start,end,netmask[,tag]'")
    if tag is not None and not _TAG.fullmatch(tag):
        check.fail(name, text, f"tag {tag!r} must be a letter then up to 31 letters, digits, "
                               "'_' or '-'")
    elif tag is not None and tag.lower() in RESERVED_TAGS:
        check.fail(name, text, f"tag {tag!r} is used by the template; choose another name")
    if first and last:
        if ipaddress.IPv4Address(first) > ipaddress.IPv4Address(last):
            check.fail(name, text, f"start {first} is after end {last}")
        elif network is not None and ipaddress.IPv4Address(last) not in network:
            check.fail(name, text, f"start and end are not in the same {network} subnet")
    if len(check.problems) != before or not (first and last):
        return None
    return DhcpRange(first, last, netmask, tag)


def _parse_range_v6(check: _Checker) -> Dhcp6Range | None:
    name = "dhcp_range_v6"
    text = check.text(name)
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) not in (2, 3):
        check.fail(name, text, "expected 'start,end[,prefix-length]'")
        return None
    first, last = check.ip(name, parts[0], 6, text), check.ip(name, parts[1], 6, text)
    prefix = int(parts[2]) if len(parts) == 3 and parts[2].isdecimal() else 64
    if len(parts) == 3 and not (parts[2].isdecimal() and 64 <= prefix <= 128):
        check.fail(name, text, "the prefix length must be a number from 64 to 128")
        return None
    if not (first and last):
        return None
    if ipaddress.IPv6Address(first) > ipaddress.IPv6Address(last):
        check.fail(name, text, f"start {first} is after end {last}")
        return None
    if ipaddress.IPv6Address(last) not in ipaddress.IPv6Network(f"{first}/{prefix}",
                                                                  strict=False):
        check.fail(name, text, f"start and end are not in the same /{prefix} prefix")
        return None
    return Dhcp6Range(first, last, prefix)


def _lease_time(check: _Checker) -> str:
    value = check.text("lease_time") or ""
    if value == "infinite":
        return value
    found = _LEASE.fullmatch(value)
    if not found:
        check.fail("lease_time", value, "expected seconds, a number with s/m/h/d/w (e.g. "
                                        "10m), or 'infinite'")
    elif int(found[1]) * _UNITS[found[2]] < 120:
        check.fail("lease_time", value, "dnsmasq's minimum lease time is 2 minutes")
    return value


def _log_facility(check: _Checker) -> str | None:
    value = check.text("log_facility")
    if value is None or value == "-" or value.lower() in _FACILITIES:
        return value
    if value.startswith("/"):
        return check.path("log_facility")
    check.fail("log_facility", value, "expected a syslog facility (daemon, local0...), an "
                                      "absolute file path or '-'")
    return None


def _leasefile(check: _Checker) -> str:
    if not check.text("leasefile"):
        check.problems.append("[dnsmasq]leasefile is required (dnsmasq's lease database)")
        return ""
    return check.path("leasefile") or ""


def _lease_reports(check: _Checker) -> dict[str, str | None]:
    """The lease report directory and the script beside the configuration file."""
    spool = check.path("lease_report_dir")
    config_file = check.path("config_file")
    if not spool or not config_file:
        return {"lease_report_dir": None, "lease_script": None}
    return {"lease_report_dir": spool,
            "lease_script": os.path.join(os.path.dirname(config_file), LEASE_SCRIPT)}


def _hostsdir(check: _Checker, conf: cfg.ConfigOpts) -> str | None:
    group = conf.pxe_filter if "pxe_filter" in conf else {}
    filter_dir = (group.dhcp_hostsdir or None) if "dhcp_hostsdir" in group else None
    own = check.path("dhcp_hostsdir")
    if filter_dir is not None:
        if not _PATH.fullmatch(filter_dir):
            check.problems.append(f"[pxe_filter]dhcp_hostsdir = {_show(filter_dir)}: expected "
                                  "an absolute path without spaces, commas or '#'")
            return None
        if own is not None and own.rstrip("/") != filter_dir.rstrip("/"):
            check.fail("dhcp_hostsdir", own, "differs from [pxe_filter]dhcp_hostsdir "
                                             f"{filter_dir!r}: dnsmasq must read the directory "
                                             "the filter writes; unset one of them")
        return filter_dir
    if own is None and not check.text("dhcp_hostsdir"):
        check.problems.append("[pxe_filter]dhcp_hostsdir is not set: dnsmasq needs the "
                              "directory the filter writes")
    return own


def from_conf(conf: cfg.ConfigOpts) -> DnsmasqSettings:
    """Validate the ``[dnsmasq]`` group of ``conf``; raise :class:`InvalidSettings` listing all."""
    options.register_opts(conf)
    check = _Checker(conf)
    mode = check.raw("mode") or "interface"
    relay = mode == "relay"
    interface = check.match("interface", _IFNAME, "an interface name (up to 15 letters, "
                                                  "digits, '_', '.', '@' or '-')")
    if interface is None and not relay and check.raw("interface") is None:
        check.problems.append("[dnsmasq]interface is required in interface mode (or set "
                              "mode = relay)")
    raw_ranges = check.raw("dhcp_ranges") or []
    valid = [r for r in (_parse_range(check, v, relay) for v in raw_ranges) if r is not None]
    if not raw_ranges:
        check.problems.append("[dnsmasq]dhcp_ranges: at least one IPv4 range is required, "
                              "e.g. dhcp_ranges = 192.0.2.100,192.0.2.200,255.255.255.0")
    for i, one in enumerate(valid):
        for other in valid[i + 1:]:
            if not (ipaddress.IPv4Address(one.end) < ipaddress.IPv4Address(other.start)
                    or ipaddress.IPv4Address(other.end) < ipaddress.IPv4Address(one.start)):
                check.problems.append(f"[dnsmasq]dhcp_ranges: {one.start}-{one.end} overlaps "
                                      f"{other.start}-{other.end}")
    tftp_root = check.path("tftp_root")
    tftp_server = check.text("tftp_server")
    tftp_server = tftp_server and check.ip("tftp_server", tftp_server, 4)
    if tftp_root and tftp_server:
        check.problems.append("[dnsmasq]tftp_root and tftp_server are both set: either this "
                              "dnsmasq serves TFTP or another server does")
    settings = DnsmasqSettings(
        mode=mode, interface=interface, ranges=tuple(valid),
        range_v6=_parse_range_v6(check), lease_time=_lease_time(check),
        sequential_ip=bool(check.raw("sequential_ip")), no_ping=bool(check.raw("no_ping")),
        **{name: check.bootfile(name) for name in _BOOTFILES},
        **{name: check.url(name) for name in ("ipxe_script_url", "http_boot_url")},
        **{name: check.url(name, _V6_SCHEMES[name]) for name in _V6_SCHEMES},
        tftp_root=tftp_root, tftp_server=tftp_server,
        hostsdir=_hostsdir(check, conf) or "", leasefile=_leasefile(check),
        pid_file=check.path("pid_file"), log_dhcp=bool(check.raw("log_dhcp")),
        log_facility=_log_facility(check),
        user=check.match("user", _USER, "a user name (lower-case letters, digits, '_', '-')"),
        **_lease_reports(check))
    for name in _V6_SCHEMES:
        if getattr(settings, name) and not settings.range_v6:
            check.problems.append(f"[dnsmasq]{name} is set without dhcp_range_v6: "
                                  "no DHCPv6 client would receive it")
    if check.problems:
        raise InvalidSettings(check.problems)
    return settings
