"""Fixtures for hook tests: a real SQLite session and a configuration."""

import pytest
from sqlalchemy.orm import Session

from inspection.db.models import Base
from pxe_filter.common.database import create_engine
from tests.unit.hooks.helpers import make_conf


@pytest.fixture
def session(tmp_path):
    """A session on a fresh SQLite database (schema from the models, fast)."""
    engine = create_engine(f"sqlite:///{tmp_path}/hooks.sqlite")
    Base.metadata.create_all(engine)
    with Session(engine) as sess:
        yield sess
    engine.dispose()


@pytest.fixture
def conf(tmp_path):
    """Default inspection options (see helpers.make_conf for others)."""
    return make_conf(tmp_path)

