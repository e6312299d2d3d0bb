"""Validated ``[dnsmasq]`` settings: every value checked before it can reach the config file.

Each option's type (:mod:`pxe_filter.dnsmasq.options`) refuses what could add dnsmasq options
of its own; here the ranges are parsed and the rules between options applied, and all the
problems are reported together, each naming its option and value.
"""

import contextlib
import ipaddress
import os
import re
from dataclasses import dataclass
from types import SimpleNamespace

from oslo_config import cfg

from pxe_filter.dnsmasq import options
from pxe_filter.dnsmasq.options import show


class DnsmasqConfigError(Exception):
    """The dnsmasq configuration cannot be produced; the message says what to fix."""


class InvalidSettings(DnsmasqConfigError):
    """One or more ``[dnsmasq]`` values are invalid."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid dnsmasq settings:\n" + "\n".join(f"  - {p}" for p in problems))


Address = ipaddress.IPv4Address | ipaddress.IPv6Address | None


@dataclass(frozen=True)
class DhcpRange:
    """One IPv4 range; ``netmask`` is required for relayed (non-local) ranges."""

    start: ipaddress.IPv4Address
    end: ipaddress.IPv4Address
    netmask: str | None = None
    tag: str | None = None


@dataclass(frozen=True)
class Dhcp6Range:
    """The optional DHCPv6 range."""

    start: ipaddress.IPv6Address
    end: ipaddress.IPv6Address
    prefix_len: int = 64


class DnsmasqSettings(SimpleNamespace):
    """Everything the template needs, already validated: every ``[dnsmasq]`` option by name,
    with ``ranges`` and ``range_v6`` parsed, ``hostsdir`` and ``lease_script`` resolved."""


#: The dhcp-script that reports leases, written beside [dnsmasq]config_file.
LEASE_SCRIPT = "dnsmasq-lease-report"
# Tags the template sets itself; a range tag with one of these names would change boot files.
RESERVED_TAGS = frozenset({"ipxe", "bios", "efi32", "efi64", "efiarm64", "httpboot", "known"})
_TAG = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: The URLs only DHCPv6 clients get.
_V6_URLS = ("ipv6_bootfile_url", "ipv6_arm64_bootfile_url", "ipv6_ipxe_script_url")


class _Checker:
    """Collects problems while reading and converting option values."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.invalid: set[str] = set()  # options whose value their type refused

    def fail(self, name: str, value: object, why: str) -> None:
        problem = f"[dnsmasq]{name} = {show(value)}: {why}"
        if problem not in self.problems:  # a range may be given twice
            self.problems.append(problem)

    def read(self, conf: cfg.ConfigOpts, name: str) -> object:
        try:
            return conf.dnsmasq[name]
        except (cfg.Error, ValueError) as exc:  # refused by the option's type
            # oslo.config prefixes the type's message with the value's location.
            self.problems.append(f"[dnsmasq]{name}: {str(exc).split(' is not valid: ')[-1]}")
            self.invalid.add(name)
            return None

    def ip(self, name: str, value: str, version: int, shown: str | None = None) -> Address:
        with contextlib.suppress(ValueError):
            if (address := ipaddress.ip_address(value)).version == version:
                return address
        self.fail(name, shown or value, f"{value!r} is not an IPv{version} address")
        return None

    def bounds(self, name: str, text: str, first: Address, last: Address,
               network: ipaddress.IPv4Network | ipaddress.IPv6Network | None) -> None:
        """A range's start must come before its end, both in ``network`` when given."""
        if first is None or last is None:
            return
        if first > last:
            self.fail(name, text, f"start {first} is after end {last}")
        elif network is not None and last not in network:
            self.fail(name, text, f"start and end are not in the same {network} subnet")


def _parse_range(check: _Checker, text: str, relay: bool) -> DhcpRange | None:
    name, before = "dhcp_ranges", len(check.problems)
    try:
        options.TEXT(text)  # what the type of every other option refuses
    except ValueError as exc:
        check.problems.append(f"[dnsmasq]{name}: {exc}")
        return None
    parts = [p.strip() for p in text.split(",")]
    netmask = parts.pop(2) if len(parts) > 2 and re.fullmatch(r"[0-9.]+", parts[2]) else None
    tag = parts.pop(2) if len(parts) > 2 else None
    if len(parts) != 2:
        check.fail(name, text, "expected 'start,end[,netmask][,tag]'" if text else "empty range")
        return None
    first, last = check.ip(name, parts[0], 4, text), check.ip(name, parts[1], 4, text)
    network = None
    if netmask is not None:
        try:
            network = ipaddress.IPv4Network(f"{parts[0]}/{netmask}", strict=False)
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
    check.bounds(name, text, first, last, network)
    return DhcpRange(first, last, netmask, tag) if len(check.problems) == before else None


def _parse_range_v6(check: _Checker, text: str | None) -> Dhcp6Range | None:
    name, before = "dhcp_range_v6", len(check.problems)
    parts = [p.strip() for p in (text or "").split(",")]
    if not text or len(parts) not in (2, 3):
        if text:
            check.fail(name, text, "expected 'start,end[,prefix-length]'")
        return None
    prefix = int(parts[2]) if len(parts) == 3 and parts[2].isdecimal() else 64
    if len(parts) == 3 and not (parts[2].isdecimal() and 64 <= prefix <= 128):
        check.fail(name, text, "the prefix length must be a number from 64 to 128")
        return None
    first, last = check.ip(name, parts[0], 6, text), check.ip(name, parts[1], 6, text)
    check.bounds(name, text, first, last,
                 first and ipaddress.IPv6Network(f"{first}/{prefix}", strict=False))
    return Dhcp6Range(first, last, prefix) if len(check.problems) == before else None


def _hostsdir(check: _Checker, conf: cfg.ConfigOpts) -> str | None:
    """``[pxe_filter]dhcp_hostsdir``, the directory dnsmasq reads and the filter writes."""
    path = conf.pxe_filter.dhcp_hostsdir
    if not path:
        check.problems.append("[pxe_filter]dhcp_hostsdir is not set: dnsmasq needs the "
                              "directory the filter writes")
    elif not re.fullmatch(options.PATH, path):
        check.problems.append(f"[pxe_filter]dhcp_hostsdir = {show(path)}: expected an "
                              "absolute path without spaces, commas or '#'")
    else:
        return path
    return None


def from_conf(conf: cfg.ConfigOpts) -> DnsmasqSettings:
    """Validate the ``[dnsmasq]`` group of ``conf``; raise :class:`InvalidSettings` listing all."""
    options.register_opts(conf)
    check = _Checker()
    s = DnsmasqSettings(**{opt.dest: check.read(conf, opt.dest) for opt in options.dnsmasq_opts})
    relay = s.mode == "relay"
    if not s.interface and not relay and "interface" not in check.invalid:
        check.problems.append("[dnsmasq]interface is required in interface mode (or set "
                              "mode = relay)")
    valid = [r for r in (_parse_range(check, v, relay) for v in s.dhcp_ranges or []) if r]
    if not s.dhcp_ranges and "dhcp_ranges" not in check.invalid:
        check.problems.append("[dnsmasq]dhcp_ranges: at least one IPv4 range is required, "
                              "e.g. dhcp_ranges = 192.0.2.100,192.0.2.200,255.255.255.0")
    for i, one in enumerate(valid):
        for other in valid[i + 1:]:
            if not (one.end < other.start or other.end < one.start):
                check.problems.append(f"[dnsmasq]dhcp_ranges: {one.start}-{one.end} overlaps "
                                      f"{other.start}-{other.end}")
    s.ranges, s.range_v6 = tuple(valid), _parse_range_v6(check, s.dhcp_range_v6)
    found = re.fullmatch(r"([0-9]+)([smhdw]?)", s.lease_time or "")
    if found and int(found[1]) * _UNITS[found[2]] < 120:
        check.fail("lease_time", s.lease_time, "dnsmasq's minimum lease time is 2 minutes")
    s.tftp_server = s.tftp_server and check.ip("tftp_server", s.tftp_server, 4)
    if s.tftp_root and s.tftp_server:
        check.problems.append("[dnsmasq]tftp_root and tftp_server are both set: either this "
                              "dnsmasq serves TFTP or another server does")
    s.hostsdir = _hostsdir(check, conf) or ""
    if not s.leasefile and "leasefile" not in check.invalid:
        check.problems.append("[dnsmasq]leasefile is required (dnsmasq's lease database)")
    # The script that reports leases lives beside the configuration file.
    s.lease_script = (os.path.join(os.path.dirname(s.config_file), LEASE_SCRIPT)
                      if s.lease_report_dir and s.config_file else None)
    for name in _V6_URLS:
        if getattr(s, name) and not s.range_v6:
            check.problems.append(f"[dnsmasq]{name} is set without dhcp_range_v6: "
                                  "no DHCPv6 client would receive it")
    if check.problems:
        raise InvalidSettings(check.problems)
    return s
