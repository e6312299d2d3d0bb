"""Auto-discovery: enroll a machine that no node matches, exactly once.

The new node and its ports (those ``[inspector]add_ports`` selects, see :func:`port_macs`)
are inserted in ONE committed transaction. Two callbacks from the same machine (even at the
same moment, in different processes) share these MACs, so the unique constraint on
``ports.address`` makes the second transaction fail; it then looks the machine up again and
finds the first node, which is not waiting for inspection data, so the duplicate gets the
generic not-found. With ``add_ports = disabled`` no port guards the enrollment (as in
Ironic, each callback of an unknown machine then enrolls a node).
"""

import json
import logging
import time
import uuid as uuidlib
from dataclasses import dataclass

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from inspection import identity, states
from inspection.db import retry
from inspection.db.engine import session_scope
from inspection.db.models import InspectionCallback, Node, Port, utcnow
from inspection.errors import NotFound, UnknownMachine
from inspection.lookup import LookupData, lookup_node
from pxe_filter.common.database import error_reason

LOG = logging.getLogger(__name__)

#: The inspect interface of discovered nodes (Ironic's default for in-band inspection).
DEFAULT_INSPECT_INTERFACE = "agent"
# Deadlocks between concurrent enrollments are possible on server databases; retrying the
# lookup then finds the winner's node (other transient errors are retried the same way).
_ATTEMPTS = 3


@dataclass(frozen=True)
class Found:
    """The node a callback belongs to, and whether this call just enrolled it."""

    node_id: int
    node_uuid: str
    created: bool
    #: The callback stored with the new node (see ``enroll_node``), if any.
    callback_id: int | None = None


def port_macs(mode: str, interfaces: list[tuple[str, bool]], pxe: str | None) -> list[str]:
    """MACs that get a port at enrollment under ``[inspector]add_ports = mode``, as the
    validate-interfaces hook selects them: ``interfaces`` are (MAC, has an IP address).

    ``pxe``: the boot interface's MAC, else (unknown) the interfaces with an IP address;
    ``active``: those with an IP address; ``all``: every one; ``disabled``: none.
    """
    if mode == "disabled":
        return []
    if mode == "pxe" and pxe is not None:
        chosen = [mac for mac, _ in interfaces if mac == pxe]
    elif mode in ("pxe", "active"):
        chosen = [mac for mac, has_ip in interfaces if has_ip]
    else:
        chosen = [mac for mac, _ in interfaces]
    return list(dict.fromkeys(chosen))


def enroll_node(engine: Engine, conf: cfg.ConfigOpts, data: LookupData,
                pxe_mac: str | None = None, callback: dict | None = None,
                *, ports: list[str] | None = None) -> Found:
    """Create the node and its ports in one committed transaction.

    Raises :class:`sqlalchemy.exc.IntegrityError` when a port with one of the MACs already
    exists (another callback won the race). ``pxe_mac`` (normalised) marks which port
    boots over PXE; without it every port is marked PXE-enabled. ``callback`` (the
    inspection data) is stored in the same transaction: a crash never leaves a discovered
    node without its data, which the ramdisk's retry could not deliver (it gets 404).
    ``ports``: the MACs that get a port (normalised); default every MAC of ``data``.
    """
    if not data.macs:
        raise NotFound("cannot enroll a machine without a valid MAC address")
    properties = {}
    # Recorded at once: a later callback of this machine through other NICs finds it.
    extra = {identity.EXTRA_KEY: dict(data.identity)} if data.identity else {}
    if conf.auto_discovery.inspection_scope:
        properties["inspection_scope"] = conf.auto_discovery.inspection_scope
    node_uuid = str(uuidlib.uuid4())
    with session_scope(sessionmaker(engine)) as session:
        node = Node(uuid=node_uuid, driver=conf.auto_discovery.driver, driver_info={},
                    driver_internal_info={}, properties=properties, extra=extra,
                    instance_info={}, provision_state=states.INITIAL, auto_discovered=True,
                    inspect_interface=DEFAULT_INSPECT_INTERFACE)
        session.add(node)
        session.flush()
        # Sorted, so that concurrent enrollments take the unique index locks in one order.
        for mac in sorted(data.macs if ports is None else ports):
            session.add(Port(uuid=str(uuidlib.uuid4()), address=mac, node_id=node.id,
                             pxe_enabled=pxe_mac is None or mac == pxe_mac, extra={},
                             local_link_connection={}, internal_info={}))
        session.flush()
        node_id = node.id
        callback_id = None
        if callback is not None:
            row = InspectionCallback(node_uuid=node_uuid, data=callback, created_at=utcnow(),
                                     attempts=0, data_size=len(json.dumps(callback)))
            session.add(row)
            session.flush()
            callback_id = row.id
    LOG.info("Auto-discovery: enrolled node %s (driver %s) for MACs %s; ports for %s",
             node_uuid, conf.auto_discovery.driver, ", ".join(data.macs),
             ", ".join(data.macs if ports is None else ports) or "none")
    return Found(node_id, node_uuid, created=True, callback_id=callback_id)


def _lookup(engine: Engine, data: LookupData) -> Found:
    session: Session
    with session_scope(sessionmaker(engine)) as session:
        node = lookup_node(session, data)
        return Found(node.id, node.uuid, created=False)


def lookup_or_discover(engine: Engine, conf: cfg.ConfigOpts, data: LookupData,
                       pxe_mac: str | None = None, callback: dict | None = None,
                       *, ports: list[str] | None = None) -> Found:
    """The node for ``data``: looked up, or enrolled (with ``callback`` stored and ``ports``
    created, see :func:`enroll_node`) when unknown and discovery is enabled.

    Raises :class:`~inspection.errors.NotFound` (generic message) otherwise, including for a
    duplicate callback that lost the enrollment race.
    """
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            return _lookup(engine, data)
        except UnknownMachine:
            if not conf.auto_discovery.enabled:
                raise
        try:
            return enroll_node(engine, conf, data, pxe_mac, callback, ports=ports)
        except sa.exc.IntegrityError:
            LOG.info("Auto-discovery: another callback enrolled MACs %s first; looking up "
                     "again", ", ".join(data.macs))
        except sa.exc.SQLAlchemyError as exc:
            if not retry.is_transient(exc) or attempt == _ATTEMPTS:
                raise
            LOG.info("Auto-discovery: transient database error while enrolling (%s); "
                     "retrying", error_reason(exc))
            time.sleep(retry.backoff(attempt))
    # The winner's node now exists, so this lookup ends in a node or a generic not-found.
    try:
        return _lookup(engine, data)
    except UnknownMachine as exc:
        # Only if the winner's node vanished again: do not loop forever.
        raise NotFound("the node enrolled by a concurrent callback disappeared") from exc
