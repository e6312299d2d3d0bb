"""ORM models with Ironic's table and column names and encodings.

Only the columns this project reads or writes are mapped; a real Ironic database has more,
all of which have defaults, so rows written here stay valid for Ironic.
"""

from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    select,
    text,
)
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    column_property,
    mapped_column,
    relationship,
)

from inspection.db.types import JsonEncodedDict, JsonEncodedList

# Ironic's provision state strings.
ENROLL = "enroll"
VERIFYING = "verifying"
MANAGEABLE = "manageable"
INSPECTING = "inspecting"
INSPECT_WAIT = "inspect wait"
INSPECT_FAILED = "inspect failed"
AVAILABLE = "available"
ACTIVE = "active"
#: States in which a node is on inspection and may PXE boot the inspection ramdisk.
INSPECTION_STATES = (INSPECTING, INSPECT_WAIT)


def utcnow() -> datetime:
    """Naive UTC timestamp, the way Ironic stores them."""
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    """Declarative base of all models."""


class TimestampMixin:
    """created_at/updated_at columns as in Ironic."""

    created_at: Mapped[datetime | None] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime | None] = mapped_column(DateTime, onupdate=utcnow)


class Chassis(TimestampMixin, Base):
    """A chassis: a label grouping nodes (Ironic's, with nothing behind it)."""

    __tablename__ = "chassis"
    __table_args__ = (UniqueConstraint("uuid", name="uniq_chassis0uuid"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    extra: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    description: Mapped[str | None] = mapped_column(String(255))


class Node(TimestampMixin, Base):
    """A bare-metal node."""

    __tablename__ = "nodes"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_nodes0uuid"),
        UniqueConstraint("name", name="uniq_nodes0name"),
        Index("provision_state_idx", "provision_state"),
        Index("reservation_idx", "reservation"),
        Index("owner_idx", "owner"),
        Index("lessee_idx", "lessee"),
        Index("conductor_group_idx", "conductor_group"),
        Index("shard_idx", "shard"),
        Index("parent_node_idx", "parent_node"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    name: Mapped[str | None] = mapped_column(String(255))
    driver: Mapped[str | None] = mapped_column(String(255))
    driver_info: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    driver_internal_info: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict,
                                                       nullable=True)
    properties: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    extra: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    instance_info: Mapped[dict] = mapped_column(JsonEncodedDict(mysql_as_long=True),
                                                default=dict, nullable=True)
    provision_state: Mapped[str | None] = mapped_column(String(15))
    target_provision_state: Mapped[str | None] = mapped_column(String(15))
    inspect_interface: Mapped[str | None] = mapped_column(String(255))
    reservation: Mapped[str | None] = mapped_column(String(255))
    last_error: Mapped[str | None] = mapped_column(Text)
    maintenance: Mapped[bool] = mapped_column(Boolean, default=False, nullable=True)
    inspection_started_at: Mapped[datetime | None] = mapped_column(DateTime)
    inspection_finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    conductor_group: Mapped[str] = mapped_column(String(255), nullable=False, default="",
                                                 server_default="")
    resource_class: Mapped[str | None] = mapped_column(String(80))
    auto_discovered: Mapped[bool] = mapped_column(Boolean, default=False, nullable=True,
                                                  server_default=false())
    # Ironic's node fields that operators set and clients show (migration 0003).
    instance_uuid: Mapped[str | None] = mapped_column(String(36))
    power_state: Mapped[str | None] = mapped_column(String(15))
    target_power_state: Mapped[str | None] = mapped_column(String(15))
    maintenance_reason: Mapped[str | None] = mapped_column(Text)
    fault: Mapped[str | None] = mapped_column(String(255))
    protected: Mapped[bool] = mapped_column(Boolean, default=False, nullable=False,
                                            server_default=false())
    protected_reason: Mapped[str | None] = mapped_column(Text)
    retired: Mapped[bool | None] = mapped_column(Boolean, default=False,
                                                 server_default=false())
    retired_reason: Mapped[str | None] = mapped_column(Text)
    owner: Mapped[str | None] = mapped_column(String(255))
    lessee: Mapped[str | None] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    shard: Mapped[str | None] = mapped_column(String(255))
    parent_node: Mapped[str | None] = mapped_column(String(36))
    network_data: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    boot_mode: Mapped[str | None] = mapped_column(String(16))
    secure_boot: Mapped[bool | None] = mapped_column(Boolean)
    automated_clean: Mapped[bool | None] = mapped_column(Boolean)
    disable_power_off: Mapped[bool | None] = mapped_column(Boolean, default=False,
                                                           server_default=false())
    bios_interface: Mapped[str | None] = mapped_column(String(255))
    boot_interface: Mapped[str | None] = mapped_column(String(255))
    console_interface: Mapped[str | None] = mapped_column(String(255))
    deploy_interface: Mapped[str | None] = mapped_column(String(255))
    firmware_interface: Mapped[str | None] = mapped_column(String(255))
    management_interface: Mapped[str | None] = mapped_column(String(255))
    network_interface: Mapped[str | None] = mapped_column(String(255))
    power_interface: Mapped[str | None] = mapped_column(String(255))
    raid_interface: Mapped[str | None] = mapped_column(String(255))
    rescue_interface: Mapped[str | None] = mapped_column(String(255))
    storage_interface: Mapped[str | None] = mapped_column(String(255))
    vendor_interface: Mapped[str | None] = mapped_column(String(255))
    chassis_id: Mapped[int | None] = mapped_column(ForeignKey("chassis.id"))
    #: The chassis' UUID, read with the node (the API shows and filters on it).
    chassis_uuid: Mapped[str | None] = column_property(
        select(Chassis.uuid).where(Chassis.id == chassis_id).correlate_except(Chassis)
        .scalar_subquery())

    ports: Mapped[list["Port"]] = relationship(back_populates="node", lazy="raise",
                                               cascade="all, delete-orphan",
                                               passive_deletes=True)


class Portgroup(TimestampMixin, Base):
    """A group of ports (bond)."""

    __tablename__ = "portgroups"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_portgroups0uuid"),
        UniqueConstraint("address", name="uniq_portgroups0address"),
        UniqueConstraint("node_id", "name", name="uniq_portgroups0nodeid0name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    name: Mapped[str | None] = mapped_column(String(255))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    address: Mapped[str | None] = mapped_column(String(18))
    extra: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    internal_info: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    properties: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    mode: Mapped[str | None] = mapped_column(String(255))
    standalone_ports_supported: Mapped[bool] = mapped_column(Boolean, default=True, nullable=True)


class Port(TimestampMixin, Base):
    """A network port (NIC) of a node, identified by its MAC address."""

    __tablename__ = "ports"
    __table_args__ = (
        UniqueConstraint("address", name="uniq_ports0address"),
        UniqueConstraint("uuid", name="uniq_ports0uuid"),
        Index("ports_node_id_idx", "node_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    address: Mapped[str | None] = mapped_column(String(18))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    pxe_enabled: Mapped[bool] = mapped_column(Boolean, default=True, nullable=True)
    extra: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)
    local_link_connection: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict,
                                                        nullable=True)
    physical_network: Mapped[str | None] = mapped_column(String(64))
    portgroup_id: Mapped[int | None] = mapped_column(ForeignKey("portgroups.id"))
    internal_info: Mapped[dict] = mapped_column(JsonEncodedDict(), default=dict, nullable=True)

    node: Mapped[Node | None] = relationship(back_populates="ports", lazy="raise")


class NodeTrait(TimestampMixin, Base):
    """A trait (CUSTOM_*, HW_*) of a node."""

    __tablename__ = "node_traits"
    __table_args__ = (Index("node_traits_idx", "trait"),)

    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"),
                                         primary_key=True)
    trait: Mapped[str] = mapped_column(String(255), primary_key=True)


class NodeInventory(TimestampMixin, Base):
    """The latest inventory and plugin data of a node."""

    __tablename__ = "node_inventory"
    __table_args__ = (Index("inventory_node_id_idx", "node_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    inventory_data: Mapped[dict] = mapped_column(JsonEncodedDict(mysql_as_long=True),
                                                 default=dict, nullable=True)
    plugin_data: Mapped[dict] = mapped_column(JsonEncodedDict(mysql_as_long=True),
                                              default=dict, nullable=True)
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))


class InspectionRule(TimestampMixin, Base):
    """An inspection rule (conditions and actions as JSON lists)."""

    __tablename__ = "inspection_rules"
    __table_args__ = (
        UniqueConstraint("uuid", name="uniq_inspection_rules0uuid"),
        Index("inspection_rules_scope_idx", "scope"),
        Index("inspection_rules_phase_idx", "phase"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    priority: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    description: Mapped[str | None] = mapped_column(String(255))
    scope: Mapped[str | None] = mapped_column(String(255))
    sensitive: Mapped[bool] = mapped_column(Boolean, default=False, nullable=False)
    phase: Mapped[str] = mapped_column(String(16), nullable=False, default="main",
                                       server_default=text("'main'"))
    conditions: Mapped[list] = mapped_column(JsonEncodedList(), default=list, nullable=True)
    actions: Mapped[list] = mapped_column(JsonEncodedList(), default=list, nullable=True)


# --- Tables of this service only (Ironic has none of them; the PXE filter never reads them) ---

class InspectionCallback(Base):
    """Inspection data the API accepted (answered 202) and no worker has finished yet.

    A worker claims a row (``owner``, ``claim`` token), processes it, and deletes it in the
    transaction that commits the result; rows of dead owners are claimed again. At most one
    row per node: newer data replaces older (as in Ironic).
    """

    __tablename__ = "inspection_callbacks"
    __table_args__ = (Index("inspection_callbacks_owner_idx", "owner"),
                      Index("inspection_callbacks_node_uuid_idx", "node_uuid", unique=True))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node_uuid: Mapped[str] = mapped_column(String(36), nullable=False)
    data: Mapped[dict] = mapped_column(JsonEncodedDict(mysql_as_long=True), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
    owner: Mapped[str | None] = mapped_column(String(255))
    claim: Mapped[str | None] = mapped_column(String(36))
    #: The node's inspection attempt when the data was accepted (inspection.attempts).
    attempt: Mapped[str | None] = mapped_column(String(36))
    retry_at: Mapped[datetime | None] = mapped_column(DateTime)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0,
                                          server_default=text("0"))
    #: Bytes of ``data`` as JSON, summed for [processing]max_pending_bytes.
    data_size: Mapped[int] = mapped_column(Integer, nullable=False, default=0,
                                           server_default=text("0"))


class InspectionProcess(Base):
    """A live process that processes callbacks (a worker, or the API all-in-one), by its
    ``[DEFAULT]host``, with its latest heartbeat (like Ironic's ``conductors`` table)."""

    __tablename__ = "inspection_processes"

    host: Mapped[str] = mapped_column(String(255), primary_key=True)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime, nullable=False, default=utcnow)
