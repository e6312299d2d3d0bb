"""Alembic environment: runs against the engine handed over by inspection.db.migration."""

from alembic import context

from inspection.db.migration import VERSION_TABLE
from inspection.db.models import Base

engine = context.config.attributes["engine"]
with engine.begin() as connection:
    context.configure(connection=connection, target_metadata=Base.metadata,
                      version_table=VERSION_TABLE, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
