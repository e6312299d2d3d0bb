"""Creating the state directories a command needs, so the shipped samples start outside systemd.

Under systemd the units' ``StateDirectory=`` creates them; run by hand (or on a fresh machine),
each command creates what is missing when it has the rights, and says what to do when not.
"""

import logging
import os

from sqlalchemy.engine import URL

from pxe_filter.common.config import ConfigError

LOG = logging.getLogger(__name__)

#: State of the inspection service (its SQLite database holds BMC credentials).
PRIVATE = 0o750
#: Directories dnsmasq reads after dropping root: the hostsdir and the ones above it.
READABLE = 0o755


def ensure_dir(path: str, mode: int = PRIVATE, what: str = "state directory") -> bool:
    """Create ``path`` (and missing parents, with ``mode``) unless it exists; True if created.

    Raises ConfigError saying what to do when it cannot be created.
    """
    if os.path.isdir(path):
        return False
    if os.path.lexists(path):
        raise ConfigError(f"{what} {path} exists but is not a directory: remove or rename "
                          f"it, or point the option at a directory")
    missing = []
    head = os.path.abspath(path)
    while head and not os.path.exists(head):
        missing.append(head)
        head = os.path.dirname(head)
    try:
        for directory in reversed(missing):
            os.mkdir(directory, mode)
            os.chmod(directory, mode)  # mkdir's mode is masked by the umask
    except OSError as exc:
        raise ConfigError(f"{what} {path} does not exist and cannot be created "
                          f"({exc.strerror or exc}): create it (mode {mode:o}, owned by the "
                          f"service's user) or run as a user who may") from None
    LOG.info("Created %s %s (mode %o)", what, path, mode)
    return True


def check_sqlite_file(url: URL, create: bool = False) -> None:
    """Refuse a missing SQLite file: connecting would create an empty database; ``create``
    (dbsync, which creates it) makes its directory (mode 0750) instead when missing."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    path = os.path.abspath(url.database)
    if os.path.exists(path):
        return
    if not create:
        raise ConfigError(f"SQLite database {path} does not exist: create it with "
                          f"'ironic-inspection dbsync' (same --config-file options) or fix "
                          f"[database]connection")
    ensure_dir(os.path.dirname(path), PRIVATE, "database directory")
