"""MAC address validation and normalisation.

dnsmasq only honours the lower-case colon form (a dash form is silently read as a hostname
rule), and hostsdir file names are built from MACs, so every MAC that crosses a trust boundary
goes through :func:`normalize_mac` before it is used.
"""

import re

import netaddr

_CANONICAL = re.compile(r"[0-9a-f]{2}(?::[0-9a-f]{2}){5}")
# Accepted spellings before netaddr parses them: hex digits and the separators of the common
# notations (colon, dash, Cisco dots), nothing else; netaddr alone would accept trailing
# newlines and one-digit octets.
_ALLOWED = re.compile(r"[0-9A-Fa-f:.\-]{12,17}")


class InvalidMAC(ValueError):
    """A value that is not a 48-bit MAC address in a recognised spelling."""

    def __init__(self, value: object) -> None:
        shown = repr(value)
        if len(shown) > 64:
            shown = shown[:61] + "..."
        super().__init__(f"invalid MAC address {shown}: expected 6 octets such as "
                         f"'52:54:00:12:34:56'")


def is_canonical(value: str) -> bool:
    """True if ``value`` is already a lower-case, colon-separated 48-bit MAC."""
    return _CANONICAL.fullmatch(value) is not None


def normalize_mac(value: object) -> str:
    """Return ``value`` as a lower-case colon-form MAC, or raise :class:`InvalidMAC`."""
    if not isinstance(value, str):
        raise InvalidMAC(value)
    if _CANONICAL.fullmatch(value):
        return value
    if not _ALLOWED.fullmatch(value) or sum(c not in ":.-" for c in value) != 12:
        raise InvalidMAC(value)
    try:
        eui = netaddr.EUI(value, version=48)
    except (netaddr.AddrFormatError, TypeError, ValueError):
        raise InvalidMAC(value) from None
    return str(eui.format(netaddr.mac_unix_expanded))


def summary(count: int, examples: list[str], what: str) -> str:
    """``"N <what>, e.g. a; b; c"``: one log line for many invalid values."""
    shown = "; ".join(examples[:3]) + ("; ..." if count > 3 else "")
    return f"{count} {what}, e.g. {shown}"


def split_valid(values: object) -> tuple[list[str], list[object]]:
    """Normalise a list of MACs, returning (valid normalised MACs, rejected raw values)."""
    if values is None:
        return [], []
    if not isinstance(values, (list, tuple, set, frozenset)):
        return [], [values]
    valid: list[str] = []
    rejected: list[object] = []
    for value in values:
        try:
            valid.append(normalize_mac(value))
        except InvalidMAC:
            rejected.append(value)
    return valid, rejected
