"""BMC addresses: collected from a node's driver_info and resolved, or reported by the ramdisk.

When inspection starts, every ``*_address`` value of ``driver_info`` (an IP, a host name or a
URL) is turned into the set of addresses the ramdisk could report as its BMC address, and
cached in ``driver_internal_info['lookup_bmc_addresses']``; lookup compares the ramdisk's
``bmc_address``/``bmc_v6address`` against that cache. Both sides are normalised with
:func:`normalize_ip` so that e.g. ``2001:DB8:0::42`` and ``2001:db8::42`` match.
"""

import ipaddress
import logging
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

LOG = logging.getLogger(__name__)

#: driver_internal_info key of the cached addresses (Ironic's name).
CACHE_KEY = "lookup_bmc_addresses"

#: A resolver takes a host name and returns the IP addresses it resolves to.
Resolver = Callable[[str], Iterable[str]]

# RFC 1123 host names; anything else in a *_address field (paths, hex IPMB addresses such as
# ipmi_target_address=0x82) is not something a BMC could be reached at.
_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")


def normalize_ip(value: object) -> str | None:
    """``value`` as a canonical IP address string (scope id dropped), or None if not an IP."""
    if not isinstance(value, str):
        return None
    text = value.strip().strip("[]").split("%", 1)[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def _usable(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    return not (addr.is_loopback or addr.is_unspecified)


def system_resolver(name: str) -> list[str]:
    """Every address ``name`` resolves to through the system resolver (empty on failure)."""
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        LOG.warning("Cannot resolve BMC host name %s: %s", name, exc)
        return []
    return [str(info[4][0]) for info in infos]


def _host_of(value: str) -> str:
    """The host part of a URL (``https://[2001:db8::1]:443/x``) or the value itself."""
    if "//" in value:
        try:
            return urlsplit(value).hostname or ""
        except ValueError:
            return ""
    return value.strip().strip("[]")


def resolve_address(value: object, resolver: Resolver = system_resolver) -> set[str]:
    """Addresses a BMC configured as ``value`` could be reported at (loopback excluded).

    An IP gives itself; a host name gives itself plus every address it resolves to, or
    nothing when it only resolves to loopback addresses (``localhost``).
    """
    if not isinstance(value, str) or not value.strip():
        return set()
    host = _host_of(value)
    ip = normalize_ip(host)
    if ip is not None:
        return {ip} if _usable(ip) else set()
    try:
        # inet_aton accepts legacy forms ("0x82", "10.1") that are no host name a BMC has.
        socket.inet_aton(host)
        return set()
    except OSError:
        pass
    if not _HOSTNAME.fullmatch(host):
        return set()
    host = host.rstrip(".").lower()
    resolved = {ip for ip in map(normalize_ip, resolver(host)) if ip is not None}
    usable = {ip for ip in resolved if _usable(ip)}
    if resolved and not usable:
        LOG.debug("BMC host name %s resolves only to loopback addresses; ignored", host)
        return set()
    return usable | {host}


def bmc_addresses(driver_info: Mapping | None, resolver: Resolver = system_resolver) -> list[str]:
    """The sorted cache value for ``driver_info``: resolved addresses of every ``*_address``."""
    result: set[str] = set()
    for key, value in (driver_info or {}).items():
        if isinstance(key, str) and key.endswith("_address"):
            result |= resolve_address(value, resolver)
    return sorted(result)


def reported_addresses(*values: object) -> list[str]:
    """The ramdisk's BMC addresses, normalised; IPA's "no BMC" values and junk are dropped."""
    result: list[str] = []
    for value in values:
        ip = normalize_ip(value)
        if ip is None:
            if value not in (None, "", "::/0"):
                LOG.debug("Ignoring reported BMC address %r: not an IP address", value)
            continue
        if _usable(ip) and ip not in result:
            result.append(ip)
    return result


def cached_addresses(driver_internal_info: Mapping | None) -> set[str]:
    """The normalised addresses cached on a node (tolerates junk written by others)."""
    cached = (driver_internal_info or {}).get(CACHE_KEY)
    if not isinstance(cached, list):
        return set()
    return {normalize_ip(v) or v.lower() for v in cached if isinstance(v, str)}
