"""The real clients (python-ironicclient, openstacksdk, IPA) against a real API process.

The clients run as subprocesses from their own venv (tests.support.venvs, ``CLIENTS``): their
dependencies never enter ours. Each test module shares one ``ironic-inspection-api`` process.
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.clients.runners import Server
from tests.integration.api_helpers import write_htpasswd
from tests.support import services, venvs
from tests.support.services_procs import start_api

USER, PASSWORD = "operator", "clients-pass"
#: Small pages, so that the clients' lists cross pages (Ironic's default is 1000).
MAX_LIMIT = 4


@pytest.fixture(scope="session")
def clients_bin() -> Path:
    """bin/ of the venv holding the real clients (installed on first use)."""
    return venvs.ensure_venv("clients", venvs.CLIENTS)


@pytest.fixture(scope="module")
def client_home(tmp_path_factory) -> Path:
    """A HOME without clouds.yaml for the client processes."""
    return tmp_path_factory.mktemp("home")


def _migrated(url: str) -> str:
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    return url


@pytest.fixture(scope="module")
def server_factory(tmp_path_factory) -> Iterator[Callable[..., Server]]:
    """Start API processes for the module: ``server_factory(auth=, postgresql=, conf=)``."""
    started: list[Server] = []
    databases: list[str] = []

    def start(*, auth: bool = False, postgresql: bool = False,
              conf: dict | None = None) -> Server:
        workdir = tmp_path_factory.mktemp("api")
        if postgresql:
            db = services.create_database(services.PG_ADMIN_URL, "PostgreSQL")
            databases.append(db)
        else:
            db = f"sqlite:///{workdir}/inspection.sqlite"
        api: dict[str, Any] = {"max_limit": MAX_LIMIT}
        if auth:
            api.update(auth_strategy="http_basic", http_basic_auth_user_file=write_htpasswd(
                workdir / "htpasswd", {USER: PASSWORD}))
        process = start_api(workdir, _migrated(db), extra_conf={"api": api, **(conf or {})})
        started.append(server := Server(process, (USER, PASSWORD) if auth else None, db))
        process.wait_ready()
        return server

    yield start
    for server in started:
        assert server.process.stop() == 0, server.process.log_text()
        assert "Traceback" not in server.process.log_text(), server.process.log_text()
    for db in databases:
        services.drop_database(services.PG_ADMIN_URL, db)
