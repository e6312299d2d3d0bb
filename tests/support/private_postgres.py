"""A PostgreSQL server of the test's own, for tests that stop and start the server (the
shared one is never restarted): ``initdb`` as the postgres user into a directory it can
reach, ``pg_ctl`` on a free port of loopback."""

import glob
import shutil
import subprocess
import tempfile
from pathlib import Path

import sqlalchemy as sa

from tests.support import services
from tests.support.services_procs import free_port


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        services.unavailable("PostgreSQL server binaries", f"no {name} under "
                                                          f"/usr/lib/postgresql")
    return found[-1]


class PrivatePostgres:
    """One private server; ``url`` names a database ``inspection`` on it."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="private-pg-"))  # /tmp: reachable by postgres
        self.dir.chmod(0o755)
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = free_port()
        self.url = f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/inspection"

    def _as_postgres(self, *argv: str) -> None:
        proc = subprocess.run(["runuser", "-u", "postgres", "--", *argv], capture_output=True,
                              text=True, timeout=120)
        if proc.returncode:
            raise AssertionError(f"{argv[0]} failed: {proc.stderr[-2000:]}")

    def start(self) -> "PrivatePostgres":
        """Create the cluster on first use, then start it and wait until it answers."""
        if not self.data.exists():
            self._as_postgres(_bin("initdb"), "-D", str(self.data), "-A", "trust",
                              "-U", "postgres", "--no-sync")
            self.up()
            engine = sa.create_engine(f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}"
                                      f"/postgres", isolation_level="AUTOCOMMIT")
            with engine.connect() as conn:
                conn.execute(sa.text("CREATE DATABASE inspection"))
            engine.dispose()
            return self
        self.up()
        return self

    def up(self) -> None:
        """Start the server (it accepts connections when this returns)."""
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                   f"-c fsync=off -c max_connections=200")
        self._as_postgres(_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
                          "-o", options, "start")

    def down(self) -> None:
        """Fast shutdown: sessions are ended, new connections refused until :meth:`up`."""
        self._as_postgres(_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        """Stop the server if it runs and delete its files."""
        subprocess.run(["runuser", "-u", "postgres", "--", _bin("pg_ctl"), "-D",
                        str(self.data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
