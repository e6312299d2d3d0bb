"""The identity of this process in node reservations, callback claims and heartbeats.

``[DEFAULT]host`` names a machine, and one machine often runs an API and a worker from one
configuration: an identity of the host alone let a starting worker release the API's
reservations. Each process therefore holds ``<host>/<role>/<instance>``, the instance drawn
anew at every start, so no two running processes share an identity and a restarted process
never mistakes its predecessor's work for its own (that work is taken over once the
predecessor's heartbeat is stale, :mod:`inspection.worker.recovery`).
"""

import uuid

from oslo_config import cfg

#: Column width of nodes.reservation, inspection_callbacks.owner, inspection_processes.host.
WIDTH = 255

_INSTANCE = uuid.uuid4().hex[:12]
_role = "service"


def set_role(role: str) -> None:
    """Name what this process is (``api``, ``worker``); called once at start."""
    global _role  # noqa: PLW0603 - one identity for the whole process
    _role = role


def of(conf: cfg.ConfigOpts) -> str:
    """This process's identity: host, role and the instance id of this start."""
    suffix = f"/{_role}/{_INSTANCE}"
    return conf.host[:WIDTH - len(suffix)] + suffix


def host_of(identity: str) -> str:
    """The ``[DEFAULT]host`` part of an identity (the whole value for older holders)."""
    parts = identity.rsplit("/", 2)
    return parts[0] if len(parts) == 3 else identity
