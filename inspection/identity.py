"""A machine's hardware identity: what identifies it when its MACs and BMC address do not.

From the inventory: manufacturer, product name and serial number (``system_vendor``), and
where present the system UUID (``system_vendor.system_uuid``) and the BMC's MAC
(``bmc_mac``). Each usable value is one identity *key*; a node that shares any key with a
callback is that machine. Placeholder values (:data:`PLACEHOLDERS`, compared without case and
surrounding blanks) identify nothing.

The keys are stored on the node, in ``extra["hardware_identity"]`` (a dict of
:data:`KEYS`), written whenever the node's inspection data is processed, so that lookup is
one indexed query on the nodes table (see migration 0006), never a scan of stored
inventories.
"""

import re
import uuid as uuidlib

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from inspection.db.models import Node
from pxe_filter.common.macs import InvalidMAC, normalize_mac

#: The key of ``nodes.extra`` that holds the identity.
EXTRA_KEY = "hardware_identity"
#: The identity keys, in the order documentation and logs list them.
KEYS = ("serial", "system_uuid", "bmc_mac")

#: Values firmware reports when nobody filled the field in: they identify nothing. Compared
#: lower-cased with blanks collapsed. Values with fewer than two distinct letters or digits
#: ("0", "00000000", "XXXXXXX", "........") are placeholders too.
PLACEHOLDERS = frozenset({
    "to be filled by o.e.m.", "to be filled by o.e.m", "to be filled by oem",
    "system serial number", "system product name", "system manufacturer", "system version",
    "chassis serial number", "base board serial number", "serial number", "default string",
    "default", "0123456789", "1234567890", "123456789", "12345678", "not specified",
    "not available", "not applicable", "n/a", "na", "none", "null", "unknown", "oem",
    "o.e.m.", "invalid", "empty", "not set", "unspecified", "sn", "serial", "number",
})
#: System UUIDs that many boards share (unset, or a firmware vendor's template value).
PLACEHOLDER_UUIDS = frozenset({
    "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "03000200-0400-0500-0006-000700080009", "01234567-89ab-cdef-0123-456789abcdef",
    "12345678-1234-5678-90ab-cddeefaabbcc",
})
_PLACEHOLDER_MACS = frozenset({"00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"})
#: Longest value kept per field: longer ones are not plausible firmware strings.
_MAX_FIELD = 255
_BLANKS = re.compile(r"\s+")
#: Outside printable ASCII, or JSON-escaped: such a value is stored escaped, and the index
#: on PostgreSQL reads the JSON text as it is (see :func:`key_expression`).
_UNSAFE = re.compile(r'[^ -~]|["\\{}]')


def clean(value: object) -> str | None:
    """``value`` lower-cased with blanks collapsed, or None for a placeholder or a
    non-string."""
    if not isinstance(value, str):
        return None
    text = _BLANKS.sub(" ", value).strip().lower()
    if not text or len(text) > _MAX_FIELD or text in PLACEHOLDERS or _UNSAFE.search(text):
        return None
    if len({c for c in text if c.isalnum()}) < 2:
        return None
    return text


def _system_uuid(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        text = str(uuidlib.UUID(value.strip()))
    except ValueError:
        return None
    return None if text in PLACEHOLDER_UUIDS else text


def _bmc_mac(value: object) -> str | None:
    try:
        mac = normalize_mac(value)
    except InvalidMAC:
        return None
    return None if mac in _PLACEHOLDER_MACS else mac


def from_inventory(inventory: object) -> dict[str, str]:
    """The usable identity keys of an inventory (possibly none)."""
    if not isinstance(inventory, dict):
        return {}
    vendor = inventory.get("system_vendor")
    vendor = vendor if isinstance(vendor, dict) else {}
    keys: dict[str, str] = {}
    serial = clean(vendor.get("serial_number"))
    if serial is not None:
        # A serial number is unique within one manufacturer's product line only; a
        # placeholder manufacturer or product counts as unknown, not as a value.
        keys["serial"] = "|".join((clean(vendor.get("manufacturer")) or "",
                                   clean(vendor.get("product_name")) or "", serial))
    system_uuid = _system_uuid(vendor.get("system_uuid"))
    if system_uuid is not None:
        keys["system_uuid"] = system_uuid
    bmc_mac = _bmc_mac(inventory.get("bmc_mac"))
    if bmc_mac is not None:
        keys["bmc_mac"] = bmc_mac
    return keys


def describe(keys: dict[str, str]) -> str:
    """For log lines."""
    return ", ".join(f"{name}={keys[name]}" for name in KEYS if name in keys) or "-"


def record(node: Node, inventory: dict) -> None:
    """Store the inventory's identity on ``node`` (in its session, not committed); the key
    is removed when the inventory has no usable identity any more."""
    keys = from_inventory(inventory)
    extra = node.extra if isinstance(node.extra, dict) else {}
    if extra.get(EXTRA_KEY) == (keys or None):
        return
    extra = {k: v for k, v in extra.items() if k != EXTRA_KEY}
    if keys:
        extra[EXTRA_KEY] = keys
    node.extra = extra  # a new dict: the JSON column only notices reassignment


def key_expression(dialect: str, name: str) -> sa.ColumnElement:
    """SQL reading ``extra["hardware_identity"][name]``: the very expression that migration
    0006 indexes, so that the database uses the index."""
    path = f"{EXTRA_KEY}.{name}"
    if dialect == "sqlite":
        return sa.literal_column(f"json_extract(nodes.extra, '$.{path}')")
    if dialect == "postgresql":
        # Not a JSON cast: PostgreSQL's JSON parsers refuse \u0000 and lone surrogates,
        # which firmware strings do contain, and an index that cannot be computed would
        # make every write of such a node fail. The values need no unescaping (_UNSAFE).
        return sa.literal_column(
            f"substring(nodes.extra from '\"{EXTRA_KEY}\": \\{{[^{{}}]*\"{name}\": "
            f"\"([^\"\\\\]*)\"')")
    return sa.literal_column(f"json_value(nodes.extra, '$.{path}')")


#: MariaDB indexes no expression: migration 0006 adds an invisible virtual column per key
#: holding its first :data:`COLUMN_LENGTH` characters, with an index (``SELECT *`` and
#: Ironic's code never see it).
COLUMN_LENGTH = 255
_INDEXED = "inspection_hardware_identity_columns"


def column_name(name: str) -> str:
    """The MariaDB column of identity key ``name``."""
    return f"hardware_{name}"


def _mysql_columns(conn: Connection) -> bool:
    # Cached per database connection: a database ironic-dbsync created has no such column.
    if _INDEXED not in conn.info:
        conn.info[_INDEXED] = bool(conn.execute(sa.text(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() "
            "AND table_name = 'nodes' AND column_name = :name"),
            {"name": column_name(KEYS[0])}).scalar())
    return conn.info[_INDEXED]


_NODES = Node.__table__


def _clause(conn: Connection, name: str, value: str) -> sa.ColumnElement:
    exact = key_expression(conn.dialect.name, name) == sa.literal(value, sa.String)
    if conn.dialect.name != "mysql" or not _mysql_columns(conn):
        return exact
    prefix = sa.literal_column(f"nodes.{column_name(name)}")
    return sa.and_(prefix == sa.literal(value[:COLUMN_LENGTH], sa.String), exact)


def matching_query(conn: Connection, keys: dict[str, str]) -> sa.Select:
    """The query of :func:`matching_nodes` (``keys`` not empty)."""
    clauses = [_clause(conn, name, keys[name]) for name in KEYS if name in keys]
    return (sa.select(_NODES.c.id, _NODES.c.uuid, _NODES.c.provision_state)
            .where(sa.or_(*clauses)).order_by(_NODES.c.id))


def matching_nodes(conn: Connection, keys: dict[str, str]) -> list[tuple[int, str, str]]:
    """(id, uuid, provision_state) of the nodes sharing any of ``keys``: one query."""
    if not keys:
        return []
    return [tuple(row) for row in conn.execute(matching_query(conn, keys))]
