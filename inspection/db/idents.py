"""Nodes named by UUID or by name, the way Ironic's API accepts either."""

import uuid as uuidlib

from sqlalchemy.sql.elements import ColumnElement

from inspection.db.models import Node


def canonical_uuid(value: object) -> str | None:
    """``value`` as a lower-case hyphenated UUID, or None if it is not a UUID."""
    try:
        return str(uuidlib.UUID(str(value)))
    except (ValueError, TypeError, AttributeError):
        return None


def is_uuid(value: object) -> bool:
    """True if ``value`` is a UUID in any spelling Python accepts."""
    return canonical_uuid(value) is not None


def node_ident_clause(ident: str) -> ColumnElement[bool]:
    """WHERE clause for the node whose UUID (any spelling) or name is ``ident``."""
    uuid = canonical_uuid(ident)
    return Node.uuid == uuid if uuid is not None else Node.name == ident
