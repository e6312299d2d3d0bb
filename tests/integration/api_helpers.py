"""Helpers for the API tests: an app on a real database, with real configuration files."""

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager

import bcrypt
from oslo_config import cfg

from inspection.api.app import close_app, create_app
from inspection.api.context import EXTENSION
from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.integration.node_factory import make_conf
from tests.support.services_procs import API_VERSION

USER, PASSWORD = "admin", "s3cret-pass"


def write_htpasswd(path, users: dict[str, str], rounds: int = 4) -> str:
    """An htpasswd file with bcrypt hashes (low cost: tests need speed, not strength)."""
    lines = [f"{user}:{bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds)).decode()}"
             for user, pw in users.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def basic(user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    """An Authorization header."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def api_conf(tmp_path, db_url: str, **groups) -> cfg.ConfigOpts:
    """Configuration on ``db_url`` (noauth unless ``api`` says otherwise)."""
    sections = {"DEFAULT": {"host": "api-test"}, "database": {"connection": db_url}}
    api = {"auth_strategy": "noauth"}
    api.update(groups.pop("api", {}))
    sections["api"] = api
    for name, options in groups.items():
        sections.setdefault(name, {}).update(options)
    return make_conf(tmp_path, **sections)


def versioned_client(app):
    """A test client naming version 1.96 on every request, as ``ironic-inspection`` does
    (a request's own version header wins)."""
    client = app.test_client()
    client.environ_base["HTTP_X_OPENSTACK_IRONIC_API_VERSION"] = API_VERSION
    return client


class Api:
    """A Flask test client on a real app; ``wait_processed()`` drains in-process work.

    ``client`` names version 1.96 as our CLI does; ``unversioned`` names none, as the ramdisk
    (IPA) does on its callback, and is served Ironic's 1.1."""

    def __init__(self, conf: cfg.ConfigOpts, **kwargs) -> None:
        self.conf = conf
        self.app = create_app(conf, **kwargs)
        self.client = versioned_client(self.app)
        self.unversioned = self.app.test_client()
        self.context = self.app.extensions[EXTENSION]

    def wait_processed(self, timeout: float = 30) -> None:
        """Wait until in-process processing is idle."""
        assert self.context.dispatcher.wait_idle(timeout), "processing did not finish"

    def close(self) -> None:
        """Release threads and connections."""
        close_app(self.app)


def fault(resp) -> dict:
    """The decoded fault of an error response in Ironic's body (Flask or requests response):
    ``{"faultstring", "faultcode", "debuginfo"[, "problems"]}``."""
    body = resp.json() if callable(resp.json) else resp.json
    assert set(body) == {"error_message"}, body
    return json.loads(body["error_message"])


def error_message(resp) -> str:
    """The message of an error response (Ironic's ``faultstring``)."""
    return fault(resp)["faultstring"]


@contextmanager
def api_on_new_database(tmp_path) -> Iterator["Api"]:
    """An in-process API on a new SQLite database under ``tmp_path``, closed after."""
    url = f"sqlite:///{tmp_path}/api.sqlite"
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    api = Api(api_conf(tmp_path, url))
    try:
        yield api
    finally:
        api.close()
