"""Exit non-zero unless PostgreSQL, MariaDB and RabbitMQ on localhost answer (used by CI)."""

import socket
import sys

import sqlalchemy as sa

from tests.support import services


def _check_db(name: str, url: str) -> str | None:
    try:
        engine = sa.create_engine(url, connect_args={"connect_timeout": 5})
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    except Exception as exc:
        return f"{name}: {str(exc).splitlines()[0]}"
    return None


def _check_tcp(name: str, hostport: str) -> str | None:
    host, port = hostport.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return None
    except OSError as exc:
        return f"{name}: {exc}"


def main() -> int:
    """Check every service; print what is missing."""
    problems = [p for p in (
        _check_db("PostgreSQL", services.PG_ADMIN_URL),
        _check_db("MariaDB", services.MYSQL_ADMIN_URL),
        _check_tcp("RabbitMQ", services.RABBIT_HOST),
    ) if p]
    for problem in problems:
        print(f"service unavailable: {problem}", file=sys.stderr)
    if not problems:
        print("PostgreSQL, MariaDB and RabbitMQ answer.")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
