"""Schema creation and upgrade (alembic), refusing databases that Ironic manages."""

import os

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from pxe_filter.common.database import DatabaseError, check_connection, describe_url

#: Our own version table, so that Ironic's ``alembic_version`` is never confused with ours.
VERSION_TABLE = "inspection_alembic_version"
# Tables that only Ironic creates: their presence means ironic-dbsync owns this schema.
_IRONIC_MARKERS = ("alembic_version", "conductors")


class ForeignSchemaError(DatabaseError):
    """The database belongs to Ironic; we read it but never migrate it."""


def _alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location",
                           os.path.join(os.path.dirname(__file__), "migrations"))
    config.attributes["engine"] = engine
    return config


def head_revision() -> str:
    """The newest migration revision shipped with this code."""
    script = ScriptDirectory.from_config(
        _alembic_config(sa.create_engine("sqlite://", hide_parameters=True)))
    head = script.get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision recorded in the database, or None if it has no schema of ours."""
    with engine.connect() as conn:
        return MigrationContext.configure(
            conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def ironic_markers(engine: Engine) -> list[str]:
    """Tables showing that Ironic created this database (empty if none)."""
    names = set(sa.inspect(engine).get_table_names())
    return [name for name in _IRONIC_MARKERS if name in names]


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str]:
    """Create or upgrade the schema; returns (revision before, revision after)."""
    check_connection(engine)
    markers = ironic_markers(engine)
    if markers:
        raise ForeignSchemaError(
            f"database {describe_url(engine.url)} was created by Ironic (it has table(s) "
            f"{', '.join(markers)}); its schema is managed by ironic-dbsync, so this command "
            f"will not touch it. The PXE filter and the inspection service read it as it is.")
    try:
        before = current_revision(engine)
        command.upgrade(_alembic_config(engine), revision)
        return before, current_revision(engine) or ""
    except sa.exc.OperationalError as exc:
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise DatabaseError(f"schema upgrade of {describe_url(engine.url)} failed: "
                            f"{reason}") from None
