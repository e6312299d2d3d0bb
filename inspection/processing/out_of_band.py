"""Out-of-band inspection: an inventory read from the BMC goes the in-band path.

The BMC actor reads the inventory (:mod:`inspection.power.redfish_inventory`) under the
node's reservation and hands it here, in its session. As Ironic's ``redfish`` inspect
interface: ``memory_mb`` and ``local_gb`` are set from what the BMC says, then the hooks of
``[redfish]inspection_hooks`` run (those that need what only the ramdisk sends are skipped,
logged once at start), then the rules where ``[inspection_rules]supported_interfaces``
includes the node's inspect interface, and the inventory is stored as in-band data is.
"""

import logging

from oslo_config import cfg
from sqlalchemy.orm import Session

from inspection import metrics
from inspection.db.models import Node
from inspection.hooks.base import (
    HookConfigError,
    InspectionHook,
    expand_hook_names,
    load_hooks,
)
from inspection.inspect_control import fail_inspection, node_ports
from inspection.power import tasks
from inspection.power.redfish_inventory import Reading
from inspection.processing.pipeline import Pipeline, StageFailed
from inspection.processing.service import InspectionService
from pxe_filter.broadcast import NodePorts
from pxe_filter.common.config import ConfigError

LOG = logging.getLogger(__name__)

#: Hooks that read what only the ramdisk sends, and what that is.
RAMDISK_ONLY = {
    "ramdisk-error": "the ramdisk's own error report",
    "extra-hardware": "the ramdisk's hardware collector data",
    "parse-lldp": "raw LLDP TLVs (the BMC's LLDP arrives already parsed)",
    "local-link-connection": "raw LLDP TLVs",
    "physical-network": "the interfaces' IP addresses",
    "cpu-capabilities": "the CPU flags",
}


def hook_names(conf: cfg.ConfigOpts) -> list[str]:
    """``[redfish]inspection_hooks``, ``$default_inspection_hooks`` expanded."""
    try:
        raw = conf.redfish.inspection_hooks
        defaults = conf.redfish.default_inspection_hooks
    except (cfg.Error, KeyError, ValueError) as exc:
        # Overrides are interpolated against [DEFAULT], where the default list is not.
        raise HookConfigError(f"cannot read [redfish]inspection_hooks: {exc} (outside a "
                              f"configuration file, list the hooks)") from None
    value = (raw or "").replace("${default_inspection_hooks}", "$default_hooks") \
        .replace("$default_inspection_hooks", "$default_hooks")
    return expand_hook_names(value, defaults or "")


def load_out_of_band_hooks(conf: cfg.ConfigOpts) -> list[InspectionHook]:
    """The hooks for inventories read from a BMC; :class:`ConfigError` when unusable."""
    names = []
    for name in hook_names(conf):
        if name in RAMDISK_ONLY:
            LOG.warning("Hook %s in [redfish]inspection_hooks is skipped: it needs %s, which "
                        "only in-band inspection has; remove it from the list", name,
                        RAMDISK_ONLY[name])
            continue
        names.append(name)
    try:
        return load_hooks(conf, names)
    except HookConfigError as exc:
        raise ConfigError(f"[redfish]inspection_hooks: {exc}".replace(
            "[inspector]hooks", "[redfish]inspection_hooks")) from None


class OutOfBandInspector:
    """Processes inventories read from BMCs (the BMC actor's ``inspector``)."""

    def __init__(self, service: InspectionService, hooks: list[InspectionHook]) -> None:
        self.rules = service.rules
        self.pipeline = Pipeline(service.conf, hooks, service.rules_engine)

    @classmethod
    def from_service(cls, service: InspectionService) -> "OutOfBandInspector":
        """Share the service's rules; load ``[redfish]inspection_hooks``."""
        return cls(service, load_out_of_band_hooks(service.conf))

    def __call__(self, session: Session, node: Node, reading: Reading) -> NodePorts | None:
        """Process ``reading`` for ``node`` (reserved, ``inspecting``); uncommitted."""
        node_id, node_uuid = node.id, node.uuid
        tasks.step_done(node)
        properties = dict(node.properties or {})
        memory_mb = reading.inventory.get("memory", {}).get("physical_mb")
        if memory_mb:
            properties["memory_mb"] = memory_mb
        properties["local_gb"] = reading.local_gb
        if not reading.local_gb:
            LOG.warning("Node %s: its BMC shows no disk or volume of at least 4 GiB; "
                        "local_gb is 0 (a disk-less node?)", node_uuid)
        node.properties = properties
        try:
            self.pipeline.run(session, node, reading.inventory, dict(reading.plugin_data),
                              self.rules.by_phase(session))
        except StageFailed as exc:
            message = str(exc)
        else:
            LOG.info("Out-of-band inspection of node %s finished; state %s", node_uuid,
                     node.provision_state)
            metrics.processed("finished")
            return node_ports(session, node)
        session.rollback()
        node = session.get(Node, node_id)
        if node is None:
            return None
        tasks.step_done(node)
        LOG.warning("Out-of-band inspection of node %s failed: %s", node_uuid, message)
        metrics.processed("failed")
        return fail_inspection(session, node, message)
