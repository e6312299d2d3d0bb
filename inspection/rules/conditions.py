"""The built-in conditions. Each is a function whose signature declares its arguments.

Attributes set by :func:`_condition`: ``literal`` names arguments that are not interpolated
(regular expressions, where ``{3}`` is a quantifier), ``checks`` maps an argument to a function
validating a literal value at rule validation time (returns an error message or None).

Regular expressions run on text the ramdisk sends, so a catastrophic pattern such as
``(a|aa)+$`` must not freeze the service: they use the ``regex`` package with a time limit
per match (releasing the GIL meanwhile), on at most :data:`MAX_REGEX_SUBJECT` characters.
Going over either limit is a :class:`ConditionError`: the rule does not match.
"""

import functools
import ipaddress
import itertools
import operator
from collections.abc import Callable
from typing import Any

import regex as rx  # the argument of contains/matches is named "regex"

#: Seconds one regular expression match may take.
REGEX_TIMEOUT = 0.1
#: Longest text (characters) a regular expression is matched against.
MAX_REGEX_SUBJECT = 65536

_TRUE = ("yes", "true")
_FALSE = ("no", "false")


class ConditionError(ValueError):
    """A condition cannot be evaluated on these values (the rule does not match)."""


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> rx.Pattern:
    return rx.compile(pattern)


@functools.lru_cache(maxsize=1024)
def _network(subnet: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(subnet, strict=False)


def check_regex(value: Any) -> str | None:
    """Validation: None if ``value`` is a valid regular expression, else the problem."""
    if not isinstance(value, str):
        return "must be a string (a regular expression)"
    try:
        _regex(value)
    except rx.error as exc:
        return f"invalid regular expression: {exc}"
    return None


def check_cidr(value: Any) -> str | None:
    """Validation: None if ``value`` is an IPv4/IPv6 network such as 192.0.2.0/24."""
    if not isinstance(value, str):
        return "must be a string (a network such as 192.0.2.0/24)"
    try:
        _network(value)
    except ValueError as exc:
        return f"invalid network: {exc}"
    return None


def _condition(literal: tuple[str, ...] = (), **checks: Callable[[Any], str | None]):
    def wrap(func):
        func.literal = literal
        func.checks = checks
        return func
    return wrap


@_condition()
def is_true(value):
    """True for true booleans, non-zero numbers and "yes"/"true" in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return isinstance(value, str) and value.strip().lower() in _TRUE


@_condition()
def is_false(value):
    """True for false booleans, zero, None and "no"/"false" in any case."""
    if value is None:
        return True
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value == 0
    return isinstance(value, str) and value.strip().lower() in _FALSE


@_condition()
def is_none(value):
    """True if the value is None (null, or a missing field)."""
    return value is None


@_condition()
def is_empty(value):
    """True for None, an empty string, list or object."""
    return value is None or (isinstance(value, (str, list, dict, tuple)) and not value)


def _compare(op: Callable[[Any, Any], bool], values: tuple, force_strings: bool) -> bool:
    if force_strings:
        values = tuple(str(v) for v in values)
    try:
        return all(op(a, b) for a, b in itertools.pairwise(values))
    except TypeError:
        kinds = ", ".join(sorted({type(v).__name__ for v in values}))
        raise ConditionError(f"cannot compare values of types {kinds} "
                             f"(force_strings compares them as strings)") from None


@_condition()
def eq(*values, force_strings=False):
    """True if all values are equal."""
    return _compare(operator.eq, values, force_strings)


@_condition()
def lt(*values, force_strings=False):
    """True if every value is less than the next one."""
    return _compare(operator.lt, values, force_strings)


@_condition()
def gt(*values, force_strings=False):
    """True if every value is greater than the next one."""
    return _compare(operator.gt, values, force_strings)


@_condition(subnet=check_cidr)
def in_net(address, subnet):
    """True if the address (or address/prefix) is in the subnet."""
    if address is None or address == "":
        return False
    try:
        network = _network(str(subnet))
    except ValueError:
        raise ConditionError("subnet is not a valid network") from None
    try:
        text = str(address)
        # ip_address is much cheaper; ip_interface only for the address/prefix form
        addr = ipaddress.ip_interface(text).ip if "/" in text else ipaddress.ip_address(text)
    except ValueError:
        return False  # not an IP address (e.g. a host name): not in any network
    return addr.version == network.version and addr in network


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def _search(pattern: str, text: str, whole: bool) -> bool:
    if len(text) > MAX_REGEX_SUBJECT:
        raise ConditionError(f"the value is too long for a regular expression ({len(text)} "
                             f"characters, at most {MAX_REGEX_SUBJECT})")
    try:
        compiled = _regex(pattern)
    except rx.error as exc:
        raise ConditionError(f"invalid regular expression: {exc}") from None
    method = compiled.fullmatch if whole else compiled.search
    try:
        return method(text, timeout=REGEX_TIMEOUT, concurrent=True) is not None
    except TimeoutError:
        raise ConditionError(f"the regular expression took more than {REGEX_TIMEOUT} s on a "
                             f"value of {len(text)} characters (catastrophic "
                             f"backtracking?); simplify the pattern") from None


@_condition(literal=("regex",), regex=check_regex)
def contains(value, regex):
    """True if the value contains a match of the regular expression."""
    text = _text(value)
    return text is not None and _search(regex, text, whole=False)


@_condition(literal=("regex",), regex=check_regex)
def matches(value, regex):
    """True if the whole value matches the regular expression."""
    text = _text(value)
    return text is not None and _search(regex, text, whole=True)


@_condition(values=lambda v: None if isinstance(v, list) else "must be a list")
def one_of(value, values):
    """True if the value is one of the values (works for non-strings too)."""
    if not isinstance(values, (list, tuple)):
        raise ConditionError("values must be a list")
    return value in values


CONDITIONS: dict[str, Callable[..., bool]] = {
    "is-true": is_true, "is-false": is_false, "is-none": is_none, "is-empty": is_empty,
    "eq": eq, "lt": lt, "gt": gt, "in-net": in_net, "contains": contains,
    "matches": matches, "one-of": one_of,
}
