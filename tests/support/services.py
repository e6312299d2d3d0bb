"""Real services for integration tests: PostgreSQL, MariaDB, RabbitMQ on localhost.

Each test session gets its own database or vhost, created here and dropped afterwards, so
parallel runs on one machine never see each other. In CI (``CI`` set) a missing service
fails the test loudly; on a developer laptop it skips with the reason.
"""

import os
import shutil
import subprocess
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

PG_ADMIN_URL = os.environ.get("TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1/test")
MYSQL_ADMIN_URL = os.environ.get("TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1/test")
RABBIT_HOST = os.environ.get("TEST_RABBIT_HOST", "127.0.0.1:5672")


def in_ci() -> bool:
    """True when running under CI, where every service must be present."""
    return bool(os.environ.get("CI"))


def unavailable(what: str, reason: object) -> None:
    """Fail (CI) or skip (laptop) because a required service or tool is missing."""
    message = f"{what} unavailable: {reason}"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def create_database(admin_url: str, kind: str) -> str:
    """Create a fresh database next to ``admin_url``'s and return its URL."""
    name = _unique("pxetest")
    try:
        admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
        admin.dispose()
    except Exception as exc:
        unavailable(kind, exc)
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, url: str) -> None:
    """Drop a database made by :func:`create_database`."""
    name = make_url(url).database
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if admin.dialect.name == "postgresql":
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        else:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
    admin.dispose()


def create_vhost() -> str:
    """Create a RabbitMQ vhost for guest and return a transport URL on it."""
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        unavailable("RabbitMQ", "rabbitmqctl not found")
    vhost = _unique("pxetest")
    for argv in ([ctl, "add_vhost", vhost],
                 [ctl, "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            unavailable("RabbitMQ", proc.stderr.strip() or proc.stdout.strip())
    return f"rabbit://guest:guest@{RABBIT_HOST}/{vhost}"


def delete_vhost(url: str) -> None:
    """Delete a vhost made by :func:`create_vhost`."""
    ctl = shutil.which("rabbitmqctl")
    vhost = url.rsplit("/", 1)[1]
    if ctl:
        subprocess.run([ctl, "delete_vhost", vhost], capture_output=True, timeout=60)
