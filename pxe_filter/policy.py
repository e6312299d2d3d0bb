"""Desired state of the hostsdir: which MACs dnsmasq serves, computed from database rows.

Pure functions, no I/O: the rules are exactly those of Ironic's own filter plus inspector's
``deny_unknown_macs``. :func:`pxe_allowed` is the one place that decides whether a node's ports
are served (state, inspect interface and :class:`Scope`): the full sync, every database
lookup and every broadcast sender use it. Sets rather than per-MAC
objects, so that comparing 100k MACs with the files costs a few set operations in C.
"""

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from itertools import islice

from pxe_filter.common import macs

LOG = logging.getLogger(__name__)

#: Provision states in which a node may PXE boot the inspection ramdisk.
INSPECTION_STATES = frozenset(("inspect wait", "inspecting"))


@dataclass
class DesiredState:
    """Canonical MACs to serve and to refuse, and the policy for every other MAC."""

    allow: set[str] = field(default_factory=set)
    deny: set[str] = field(default_factory=set)
    unknown_allowed: bool = False
    invalid: int = 0
    #: The MACs served for each served node (by UUID): what to re-check when it stops being
    #: served, without reading every port to find them.
    served_by: dict[str, set[str]] = field(default_factory=dict)

    def decision(self, mac: str) -> bool:
        """True if dnsmasq should serve ``mac`` (a canonical MAC; for the wildcard's file
        name, never canonical, the unknown-MAC policy)."""
        if mac in self.deny:
            return False
        return mac in self.allow or self.unknown_allowed

    def set(self, mac: str, allow: bool) -> None:
        """Set the decision for ``mac`` (a newer read of its port, or a deny)."""
        (self.allow if allow else self.deny).add(mac)
        (self.deny if allow else self.allow).discard(mac)

    def forget(self, mac: str) -> None:
        """``mac`` has no port (here): the unknown-MAC policy decides for it."""
        self.allow.discard(mac)
        self.deny.discard(mac)


#: How the configuration spells Ironic's default conductor group ('') and "no shard" (NULL):
#: neither is a name Ironic accepts, so they cannot clash with a real group or shard.
DEFAULT_GROUP = "<default>"
NO_SHARD = "<none>"
#: What the out-of-scope nodes' ports get: a deny file each, or no file (the wildcard).
OUT_OF_SCOPE_DENY, OUT_OF_SCOPE_WILDCARD = "deny", "wildcard"


@dataclass(frozen=True)
class Scope:
    """The nodes a filter serves: conductor groups and shards (None: any); both must match."""

    conductor_groups: frozenset[str] | None = None
    shards: frozenset[str | None] | None = None
    #: Out-of-scope nodes' ports get deny files (else they follow the wildcard).
    deny_outside: bool = True

    @classmethod
    def from_options(cls, groups: Iterable[str], shards: Iterable[str],
                     out_of_scope: str = OUT_OF_SCOPE_DENY) -> "Scope":
        """From the configured lists (empty: no scope); Ironic stores groups lower-case."""
        group_set = frozenset("" if g.lower() == DEFAULT_GROUP else g.lower() for g in groups)
        shard_set = frozenset(None if s.lower() == NO_SHARD else s for s in shards)
        return cls(group_set or None, shard_set or None, out_of_scope != OUT_OF_SCOPE_WILDCARD)

    @property
    def scoped(self) -> bool:
        """True if some nodes are outside the scope."""
        return self.conductor_groups is not None or self.shards is not None

    def contains(self, conductor_group: str | None, shard: str | None) -> bool:
        """True if a node of this conductor group and shard is in the scope."""
        if self.conductor_groups is not None and conductor_group not in self.conductor_groups:
            return False
        return self.shards is None or shard in self.shards

    def describe(self) -> str:
        """One line for logs and the status."""
        if not self.scoped:
            return "every node (no scope)"
        parts = []
        if self.conductor_groups is not None:
            parts.append("conductor groups " + ", ".join(
                sorted(g or DEFAULT_GROUP for g in self.conductor_groups)))
        if self.shards is not None:
            parts.append("shards " + ", ".join(sorted(s or NO_SHARD for s in self.shards)))
        return (" and ".join(parts) + f"; other nodes' ports: "
                f"{'denied' if self.deny_outside else 'left to the unknown-MAC wildcard'}")


UNSCOPED = Scope()


def pxe_allowed(provision_state: str | None, inspect_interface: str | None,
                supported_interfaces: Collection[str], *, scope: Scope = UNSCOPED,
                conductor_group: str | None = "", shard: str | None = None) -> bool:
    """True if the ports of a node in this state, with this inspect interface, in this
    conductor group and shard, are served by a filter of ``scope``."""
    return (provision_state in INSPECTION_STATES and inspect_interface in supported_interfaces
            and scope.contains(conductor_group, shard))


def nodes_on_inspection(nodes: Iterable[tuple], supported_interfaces: Collection[str],
                        scope: Scope = UNSCOPED) -> set[int]:
    """Ids of the nodes whose ports are served (:func:`pxe_allowed`).

    ``nodes`` yields (id, provision_state, inspect_interface, conductor_group, shard).
    """
    return {node_id for node_id, state, interface, group, shard in nodes
            if pxe_allowed(state, interface, supported_interfaces, scope=scope,
                           conductor_group=group, shard=shard)}


def compute_split(allow: set, deny: set, unknown: bool) -> DesiredState:
    """Desired state from raw addresses of ports whose node is on inspection (``allow``)
    and of all others (``deny``), ``unknown`` MACs allowed or not; both sets are consumed
    (normalised in place)."""
    allow, bad_allow = _normalise(allow)
    deny, bad_deny = _normalise(deny)
    allow -= deny
    return DesiredState(allow=allow, deny=deny, unknown_allowed=unknown,
                        invalid=bad_allow + bad_deny)


@dataclass(frozen=True)
class Settings:
    """The options every verdict depends on besides the database; replaced whole on SIGHUP,
    so that one read decides under one set of them."""

    supported_interfaces: frozenset[str] = frozenset(("agent",))
    discovery_enabled: bool = False
    deny_unknown_macs: bool = False
    scope: Scope = UNSCOPED

    @classmethod
    def from_conf(cls, conf) -> "Settings":
        """From ``[pxe_filter]`` and ``[auto_discovery]``; raises ValueError for a bad scope."""
        opts = conf.pxe_filter
        return cls(frozenset(opts.supported_inspect_interfaces), conf.auto_discovery.enabled,
                   opts.deny_unknown_macs,
                   Scope.from_options(opts.conductor_groups, opts.shards, opts.out_of_scope))

    def verdict(self, port) -> bool | None:
        """Whether a port's MAC is served (a :class:`pxe_filter.source.PortView`: its node);
        None when the unknown-MAC policy decides for it (a node outside the scope whose
        ports the scope leaves to the wildcard)."""
        group, shard = port.conductor_group, port.shard
        if not self.scope.deny_outside and not self.scope.contains(group, shard):
            return None
        return pxe_allowed(port.provision_state, port.inspect_interface,
                           self.supported_interfaces, scope=self.scope,
                           conductor_group=group, shard=shard)

    def unknown_allowed(self, any_served: bool) -> bool:
        """Whether MACs of no port are served: with auto-discovery, or while a node's ports
        are served (Ironic's active inspection), unless ``deny_unknown_macs``."""
        return (self.discovery_enabled or any_served) and not self.deny_unknown_macs


DEFAULTS = Settings()


#: Values checked per batch by :func:`_all_canonical`: joining 1M MACs at once would make
#: an 18 MB string (and its translated copy) at the sync's memory peak.
_CHECK_BATCH = 65536


def _all_canonical(values: set) -> bool:
    """True if every value is a canonical MAC (and there is one), checked in a few C-level
    passes per batch.

    A conservative shortcut for the common case (Ironic stores canonical MACs); when it says
    False, each value is checked on its own.
    """
    if not values:
        return False
    remaining = iter(values)
    while batch := list(islice(remaining, _CHECK_BATCH)):
        if not _batch_canonical(batch):
            return False
    return True


def _batch_canonical(values: list) -> bool:
    count = len(values)
    try:
        joined = "\n".join(values) + "\n"
    except TypeError:
        return False  # not all strings
    # Every value is 17 characters without a newline: newlines exactly every 18th character.
    if len(joined) != 18 * count or joined.count("\n") != count \
            or joined[17::18].count("\n") != count:
        return False
    if joined.translate(_DROP_CANONICAL_CHARS):
        return False  # a character other than 0-9, a-f and ':'
    if joined.count(":") != 5 * count:
        return False
    return all(joined[pos::18].count(":") == count for pos in (2, 5, 8, 11, 14))


_DROP_CANONICAL_CHARS = str.maketrans("", "", "0123456789abcdef:\n")


def _normalise(values: set) -> tuple[set[str], int]:
    """``values`` in canonical form (in place when already canonical), and the invalid count."""
    values.discard(None)
    if _all_canonical(values):
        return values, 0
    odd = [value for value in values if not macs.is_canonical(value)]
    bad: list[str] = []
    for value in odd:
        values.discard(value)
        try:
            values.add(macs.normalize_mac(value))
        except macs.InvalidMAC as exc:
            bad.append(str(exc))
    if bad:
        LOG.warning("Skipping %s; fix or delete those ports",
                    macs.summary(len(bad), bad, "port(s) with an invalid address in the "
                                                "database"))
    return values, len(bad)
