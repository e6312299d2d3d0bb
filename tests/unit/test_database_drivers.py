"""A database URL without a driver uses the driver the extras install, and a missing driver
names the extra to install."""

import pytest

from pxe_filter.common.database import DatabaseError, create_engine


@pytest.mark.parametrize(("url", "driver"), [
    ("postgresql://user:secret@localhost/db", "postgresql+psycopg2"),
    ("mysql://user:secret@localhost/db", "mysql+pymysql"),
    ("postgresql+psycopg2://user:secret@localhost/db", "postgresql+psycopg2"),
])
def test_bare_url_gets_the_installed_driver(url, driver):
    engine = create_engine(url)
    try:
        assert engine.url.drivername == driver
    finally:
        engine.dispose()


def test_missing_driver_names_the_extra():
    # psycopg (3) is not what the [postgresql] extra installs.
    with pytest.raises(DatabaseError) as caught:
        create_engine("postgresql+psycopg://user:secret@localhost/db")
    message = str(caught.value)
    assert "postgresql+psycopg2://" in message and "[postgresql]" in message
    assert "secret" not in message
