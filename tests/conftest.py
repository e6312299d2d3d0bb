"""Shared fixtures: real databases (SQLite, PostgreSQL, MariaDB) and a RabbitMQ vhost."""

from pathlib import Path

import pytest

from inspection.db import migration
from inspection.db.models import Base
from pxe_filter.common.database import create_engine
from tests.support import services

QUICK = Path(__file__).parent / "unit"


def pytest_collection_modifyitems(items) -> None:
    """Everything outside tests/unit needs a service, root or a third-party venv: mark it
    ``integration``, so that ``-m "not integration"`` is the quick subset."""
    for item in items:
        if QUICK not in Path(item.fspath).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def pg_url():
    """URL of a fresh PostgreSQL database (dropped after the session)."""
    url = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
    yield url
    services.drop_database(services.PG_ADMIN_URL, url)


@pytest.fixture(scope="session")
def mysql_url():
    """URL of a fresh MariaDB database (dropped after the session)."""
    url = services.create_database(services.MYSQL_ADMIN_URL, "MariaDB")
    yield url
    services.drop_database(services.MYSQL_ADMIN_URL, url)


@pytest.fixture
def sqlite_url(tmp_path):
    """URL of an SQLite file in the test's temporary directory."""
    return f"sqlite:///{tmp_path}/inspection.sqlite"


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def db_url(request, tmp_path):
    """Each real backend in turn, migrated and emptied for every test."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/inspection.sqlite"
    else:
        url = request.getfixturevalue("pg_url" if request.param == "postgresql"
                                      else "mysql_url")
    engine = create_engine(url)
    migration.upgrade(engine)
    _empty(engine)
    engine.dispose()
    return url


def _empty(engine) -> None:
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())


@pytest.fixture
def db_engine(db_url):
    """An engine on :func:`db_url`."""
    engine = create_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def rabbit_url():
    """A transport URL on a fresh RabbitMQ vhost (deleted after the session)."""
    url = services.create_vhost()
    yield url
    services.delete_vhost(url)
