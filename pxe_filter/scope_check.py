"""A scoped filter checks a broadcast's allows against the database before writing them.

Broadcasts carry only MACs, and every conductor sends them to every filter: an allow may name
a MAC of a node this filter does not serve. One batched query by ``ports.address`` (unique,
indexed) finds each MAC's node; :func:`pxe_filter.policy.screen_allows` decides. If the
database does not answer, no allow is applied (fail closed): the next sync decides.
"""

import logging
from collections.abc import Sequence

from pxe_filter import policy
from pxe_filter.common.database import DatabaseError
from pxe_filter.source import Source

LOG = logging.getLogger(__name__)


def screen(source: Source, scope: policy.Scope, allow: Sequence[str], deny: Sequence[str],
           origin: str) -> tuple[list[str], list[str]]:
    """(allow, deny) to apply: only in-scope allows stay; out-of-scope ones become denies
    under ``deny``; the rest is dropped and logged. No query for an unscoped filter."""
    if not scope.scoped or not allow:
        return list(allow), list(deny)
    try:
        owners = source.port_owners(set(allow))
    except DatabaseError as exc:
        LOG.error("%s: %d allow(s) not applied, their scope cannot be checked: %s; the next "
                  "sync decides", origin, len(allow), exc)
        return [], list(deny)
    ok, outside, skipped = policy.screen_allows(allow, owners, scope)
    unknown = [mac for mac in skipped if mac not in owners]
    foreign = len(outside) + len(skipped) - len(unknown)
    if foreign or unknown:
        LOG.info("%s: %d allow(s) of nodes outside this filter's scope %s, %d of no port "
                 "not applied (scope: %s)", origin, foreign,
                 "denied" if scope.deny_outside else "left to the wildcard", len(unknown),
                 scope.describe())
        LOG.debug("%s: not allowed %s", origin, sorted(set(allow) - set(ok)))
    return ok, [*deny, *outside]
