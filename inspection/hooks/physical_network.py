"""physical-network: a port's ``physical_network`` from ``[inspector]physical_network_cidr_map``.

Entries are ``CIDR:physnet``, split on the LAST colon so IPv6 CIDRs work
(``2001:db8::/64:physnet-b``); they are validated at start. A port gets the physnet of the
first entry (in configuration order) that contains its interface's IPv4 address, else its
IPv6 address. Subclass and override :meth:`PhysicalNetworkHook.get_physical_network` for a
different logic.
"""

import ipaddress
import logging

from oslo_config import cfg

from inspection.hooks import inventory as inv
from inspection.hooks.base import HookConfigError, InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_cidr_map(entries: list[str]) -> list[tuple[Network, str]]:
    """Parse ``CIDR:physnet`` entries in order."""
    result = []
    for entry in entries:
        cidr, sep, physnet = entry.strip().rpartition(":")
        physnet = physnet.strip()
        try:
            network = ipaddress.ip_network(cidr.strip(), strict=False) if sep else None
        except ValueError:
            network = None
        if network is None or not physnet or len(physnet) > 64:
            raise HookConfigError(f"[inspector]physical_network_cidr_map entry {entry!r} is "
                                  f"not 'CIDR:physnet' (e.g. 10.0.0.0/24:physnet-a or "
                                  f"2001:db8::/64:physnet-b)")
        result.append((network, physnet))
    return result


class PhysicalNetworkHook(InspectionHook):
    """Set ports' physical network from the subnet their interface is on."""

    name = "physical-network"
    dependencies = ("validate-interfaces",)

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        self.cidr_map = parse_cidr_map(list(conf.inspector.physical_network_cidr_map))

    def get_physical_network(self, interface: dict) -> str | None:
        """The physical network for an interface (from ``all_interfaces``), or None."""
        for key in ("ipv4_address", "ipv6_address"):
            address = inv.ip_address(interface.get(key), key)
            if address is None:
                continue
            for network, physnet in self.cidr_map:
                if address.version == network.version and address in network:
                    return physnet
        return None

    def __call__(self, ctx: InspectionContext) -> None:
        """Update ``physical_network`` of every port whose interface maps to one."""
        all_ifaces = ctx.plugin_data.get("all_interfaces")
        if not isinstance(all_ifaces, dict):
            raise self.fail("plugin data has no all_interfaces: the validate-interfaces hook "
                            "must run first")
        for name, iface in all_ifaces.items():
            port = ctx.edit.port_by_address(iface["mac_address"])
            if port is None:
                LOG.debug("Node %s: no port for interface %s", ctx.node_ident, name)
                continue
            physnet = self.get_physical_network(iface)
            if physnet is not None and port.physical_network != physnet:
                LOG.info("Node %s: port %s is on physical network %s", ctx.node_ident,
                         port.address, physnet)
                port.physical_network = physnet
