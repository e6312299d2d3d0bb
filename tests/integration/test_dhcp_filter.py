"""The ironic-pxe-filter daemon drives a real dnsmasq: DHCP offers follow the database and
broadcasts within a second.

The daemon runs with a one-hour sync period, so after its first sync only a broadcast can
change what dnsmasq answers.
"""

import uuid

import pytest
from sqlalchemy.orm import Session

from inspection.db import migration
from inspection.db.models import INSPECT_WAIT, INSPECTING, MANAGEABLE, Node, Port
from pxe_filter import broadcast
from pxe_filter.common import messaging
from pxe_filter.common.database import create_engine
from tests.support.daemon import start_filter

pytestmark = pytest.mark.netns
pytest_plugins = ["tests.support.dhcp_fixtures"]

MANAGED = "52:54:00:bb:00:01"      # node in 'manageable': denied until a broadcast says allow
WAITING = "52:54:00:bb:00:02"      # node in 'inspect wait' with the agent interface: allowed
INSPECTING_MAC = "52:54:00:bb:00:03"  # node in 'inspecting' with the agent interface: allowed
OTHER_IFACE = "52:54:00:bb:00:04"  # node in 'inspect wait' with an unsupported interface
UNKNOWN = "52:54:00:bb:00:05"      # no port: follows the unknown-MAC policy
LONG_SYNC = {"pxe_filter": {"sync_period": "3600"}}


def _add_node(session: Session, state: str, mac: str, inspect_interface: str = "agent") -> None:
    node = Node(uuid=str(uuid.uuid4()), driver="fake-hardware", provision_state=state,
                inspect_interface=inspect_interface)
    session.add(node)
    session.flush()
    session.add(Port(uuid=str(uuid.uuid4()), address=mac, node_id=node.id, pxe_enabled=True))


def _set_state(url: str, mac: str, state: str) -> None:
    engine = create_engine(url)
    with Session(engine) as session, session.begin():
        port = session.query(Port).filter_by(address=mac).one()
        session.get(Node, port.node_id).provision_state = state
    engine.dispose()


@pytest.fixture
def filter_db(sqlite_url):
    """A migrated SQLite database with one node per interesting case."""
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    with Session(engine) as session, session.begin():
        _add_node(session, MANAGEABLE, MANAGED)
        _add_node(session, INSPECT_WAIT, WAITING)
        _add_node(session, INSPECTING, INSPECTING_MAC)
        _add_node(session, INSPECT_WAIT, OTHER_IFACE, inspect_interface="redfish")
    engine.dispose()
    return sqlite_url


@pytest.fixture
def transport(rabbit_url):
    """An oslo.messaging transport on the test's RabbitMQ vhost."""
    transport = messaging.get_transport(rabbit_url)
    yield transport
    transport.cleanup()


def test_first_sync_decides_who_gets_offers(tmp_path, filter_db, hostsdir, dnsmasq_factory,
                                            dhcp_client):
    daemon = start_filter(tmp_path, filter_db, hostsdir, extra_conf=LONG_SYNC)
    try:
        daemon.wait_ready(30)
        dnsmasq_factory(hostsdir)
        assert dhcp_client.discover(WAITING) is not None
        assert dhcp_client.discover(INSPECTING_MAC) is not None
        assert dhcp_client.discover(MANAGED, control=WAITING) is None
        assert dhcp_client.discover(OTHER_IFACE, control=WAITING) is None
        # Nodes are on inspection, so a machine with no port may boot (Ironic's policy).
        assert dhcp_client.discover(UNKNOWN) is not None
        assert daemon.stop() == 0
    finally:
        daemon.stop()


def test_broadcast_opens_and_closes_a_mac_within_a_second(  # noqa: PLR0917 - fixtures
        tmp_path, filter_db, hostsdir, dnsmasq_factory, dhcp_client, rabbit_url, transport):
    daemon = start_filter(tmp_path, filter_db, hostsdir, transport_url=rabbit_url,
                          extra_conf=LONG_SYNC)
    try:
        # READY means the first sync is done and the broadcast listener is consuming.
        daemon.wait_ready(30)
        dnsmasq_factory(hostsdir)
        assert dhcp_client.discover(MANAGED, control=WAITING) is None

        # As a conductor does: commit the node's state, then cast.
        _set_state(filter_db, MANAGED, INSPECT_WAIT)
        broadcast.broadcast(transport, allow=[MANAGED])
        opened = dhcp_client.await_offer(MANAGED, offered=True, within=1.0)

        _set_state(filter_db, MANAGED, MANAGEABLE)
        broadcast.broadcast(transport, deny=[MANAGED])
        closed = dhcp_client.await_offer(MANAGED, offered=False, within=1.0, control=WAITING)

        # The other MACs keep their policy.
        assert dhcp_client.discover(WAITING) is not None
        assert dhcp_client.discover(OTHER_IFACE, control=WAITING) is None
        print(f"broadcast to DHCP: allow {opened * 1000:.0f} ms, deny {closed * 1000:.0f} ms")
        assert daemon.stop() == 0
    finally:
        daemon.stop()
