"""Fixtures shared by the filter's database-backed unit tests."""

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine


@pytest.fixture
def engine(sqlite_url):
    """A migrated SQLite database of the test's own, disposed after."""
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def hosts(tmp_path):
    """An empty hostsdir."""
    path = tmp_path / "hosts"
    path.mkdir()
    return path
