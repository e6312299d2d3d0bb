"""The filters of ``GET /v1/nodes`` for Ironic's node fields, and the API versions that
allow them and the fields."""

from collections.abc import Iterable

import sqlalchemy as sa
from flask import request
from sqlalchemy.orm import Session

from inspection.api import authz, node_fields
from inspection.api.errors import ApiError
from inspection.api.nodes_query import find_node
from inspection.api.pagination import bool_filter
from inspection.api.versions import require_for
from inspection.db.models import Node
from inspection.errors import NotFound

#: The version at which Ironic added each filter (1.x); it checks no other (``retired``,
#: ``project`` and ``description_contains`` are taken at every version).
FILTER_VERSIONS = {"provision_state": 9, "driver": 16, "resource_class": 21, "fault": 42,
                   "conductor_group": 46, "conductor": 49, "owner": 50, "lessee": 65,
                   "shard": 82, "sharded": 82, "parent_node": 83, "include_children": 83}
#: Ironic's faults: the values ``?fault=`` takes.
VALID_FAULTS = ("power failure", "clean failure", "rescue abort failure", "service failure")


#: Filters Ironic's ``/v1/nodes/detail`` takes at every version (it checks them on
#: ``/v1/nodes`` only).
_UNCHECKED_ON_DETAIL = ("parent_node", "include_children")


def check_filter_versions(detail_path: bool = False) -> None:
    """406 for a filter newer than the request's API version, as Ironic answers."""
    for name, minor in FILTER_VERSIONS.items():
        if name in request.args and not (detail_path and name in _UNCHECKED_ON_DETAIL):
            require_for(minor, f"filtering nodes by {name}")
    fault = request.args.get("fault")
    if fault is not None and fault not in VALID_FAULTS:
        raise ApiError(400, f'Unrecognized fault "{fault[:64]}" is specified, allowed faults '
                            f'are {", ".join(VALID_FAULTS)}')


def field_filters(query: sa.Select) -> sa.Select:
    """``query`` narrowed by the filters of Ironic's node fields (owner, lessee, project,
    description_contains, shard, sharded)."""
    project = request.args.get("project")
    if project is not None:  # a project's nodes: those it owns or leases
        query = query.where(sa.or_(Node.owner == project, Node.lessee == project))
    text = request.args.get("description_contains")
    if text is not None:  # any case (Ironic on MySQL), literally: % and _ are no wildcards
        query = query.where(Node.description.icontains(text, autoescape=True))
    shards = request.args.get("shard")
    if shards is not None:  # a comma-separated list, as Ironic reads it
        query = query.where(Node.shard.in_([s.strip() for s in shards.split(",")]))
    sharded = bool_filter("sharded")
    if sharded is not None:
        query = query.where(Node.shard.is_not(None) if sharded else Node.shard.is_(None))
    return query


def children_filter(session: Session, query: sa.Select) -> sa.Select:
    """As Ironic: child nodes are listed only with ``include_children``, or by their parent."""
    parent = request.args.get("parent_node")
    if parent is not None:
        return query.where(Node.parent_node == parent_uuid(session, parent, strict=False))
    if bool_filter("include_children"):
        return query
    return query.where(Node.parent_node.is_(None))


def parent_uuid(session: Session, ident: str, strict: bool = True) -> str:
    """The UUID of the node ``ident`` names; 400 as Ironic words it when there is none
    (``strict``), else ``ident`` itself (a filter then matches nothing)."""
    try:
        node = find_node(session, ident)
    except NotFound:
        node = None
    # A parent the user may not see is refused as if it did not exist.
    if node is not None and (not strict or authz.visible(node)):
        return node.uuid
    if not strict:
        return ident
    raise ApiError(400, f"Unable to apply the requested parent_node '{ident[:64]}'. "
                        f"Requested value was invalid.")


def check_field_versions(names: Iterable[str], action: str) -> None:
    """406 for a node field newer than the request's API version (``action`` it, e.g.
    "showing")."""
    for name in names:
        minor = node_fields.FIELD_VERSIONS.get(name)
        if minor is not None:
            require_for(minor, f"{action} the node field {name}")
