"""Decoding of raw LLDP TLVs as IPA sends them: ``[[type, "hex value"], ...]`` per interface.

Covers the 802.1AB basic management TLVs and the 802.1Q/802.3 organisational ones that
matter for networking (VLANs, link aggregation, MTU, autonegotiation). The names of the
decoded fields are Ironic's (``switch_chassis_id``, ``switch_port_vlans``...). LLDP data comes
from whatever switch the node is cabled to: a TLV that cannot be decoded is skipped and
reported in the returned warnings, never an exception.
"""

import ipaddress
import logging
import struct
from dataclasses import dataclass, field
from typing import Any

from inspection.common.untrusted import for_log

LOG = logging.getLogger(__name__)

CHASSIS_ID, PORT_ID, TTL, PORT_DESC, SYS_NAME, SYS_DESC, SYS_CAPS, MGMT_ADDR = range(1, 9)
END, ORG_SPECIFIC = 0, 127
MAX_VALUE_LEN = 511
OUI_8021, OUI_8023 = "0080c2", "00120f"

_CAPABILITIES = ["Other", "Repeater", "Bridge", "WLAN", "Router", "Telephone",
                 "DOCSIS cable device", "Station only", "C-Vlan", "S-Vlan", "TPMR"]
_CHASSIS_MAC, _CHASSIS_ADDR = 4, 5
_PORT_MAC, _PORT_ADDR = 3, 4


class TLVError(ValueError):
    """One TLV that cannot be decoded."""


@dataclass
class LLDPInfo:
    """Decoded LLDP of one interface: Ironic-named fields plus the chassis id's subtype."""

    fields: dict[str, Any] = field(default_factory=dict)
    chassis_id_is_mac: bool = False
    warnings: list[str] = field(default_factory=list)

    def set(self, name: str, value: Any) -> None:
        """Set a field unless an earlier TLV already did (the first TLV wins)."""
        self.fields.setdefault(name, value)

    def append(self, name: str, value: Any) -> None:
        """Append to a list field (VLANs, management addresses...)."""
        self.fields.setdefault(name, []).append(value)


def _mac(data: bytes) -> str:
    if len(data) != 6:
        raise TLVError(f"a MAC address needs 6 bytes, got {len(data)}")
    return ":".join(f"{b:02x}" for b in data)


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TLVError("text is not valid UTF-8") from None


def _iana_address(data: bytes) -> str:
    """An IANA address family byte followed by the address."""
    if not data:
        raise TLVError("empty address")
    family, raw = data[0], data[1:]
    if family == 1 and len(raw) == 4:
        return str(ipaddress.IPv4Address(raw))
    if family == 2 and len(raw) == 16:
        return str(ipaddress.IPv6Address(raw))
    if family == 6:
        return _mac(raw)
    raise TLVError(f"unsupported address family {family} with {len(raw)} bytes")


def _id_value(data: bytes, mac_subtype: int, addr_subtype: int) -> tuple[int, str]:
    if len(data) < 2:
        raise TLVError("identifier TLV too short")
    subtype, raw = data[0], data[1:]
    if subtype == mac_subtype:
        return subtype, _mac(raw)
    if subtype == addr_subtype:
        return subtype, _iana_address(raw)
    return subtype, _text(raw)


def _capabilities(bits: int) -> list[str]:
    # Bit 0 is "Other", which Ironic does not report.
    return [name for bit, name in enumerate(_CAPABILITIES) if bit and bits & (1 << bit)]


def _u16(data: bytes, offset: int = 0) -> int:
    if len(data) < offset + 2:
        raise TLVError("value too short")
    return struct.unpack_from("!H", data, offset)[0]


def _exact(data: bytes, size: int, what: str) -> None:
    if len(data) != size:
        raise TLVError(f"{what} needs {size} bytes, got {len(data)}")


def _dot1(info: LLDPInfo, subtype: int, data: bytes) -> None:
    if subtype == 1:
        info.set("switch_port_untagged_vlan_id", _u16(data))
    elif subtype == 2:
        _exact(data, 3, "port and protocol VLAN")
        info.set("switch_port_protocol_vlan_support", bool(data[0] & 0x02))
        info.set("switch_port_protocol_vlan_enabled", bool(data[0] & 0x04))
        info.append("switch_port_protocol_vlan_ids", _u16(data, 1))
    elif subtype == 3:
        vid = _u16(data)
        if len(data) < 3 or len(data) < 3 + data[2]:
            raise TLVError("VLAN name TLV too short")
        info.append("switch_port_vlans", {"id": vid, "name": _text(data[3:3 + data[2]])})
    elif subtype == 4:
        if not data or len(data) < 1 + data[0]:
            raise TLVError("protocol identity TLV too short")
        info.append("switch_protocol_identities", data[1:1 + data[0]].hex())
    elif subtype == 6:
        info.set("switch_port_management_vlan_id", _u16(data))
    elif subtype == 7:
        _link_aggregation(info, data)


def _link_aggregation(info: LLDPInfo, data: bytes) -> None:
    _exact(data, 5, "link aggregation")
    info.set("switch_port_link_aggregation_support", bool(data[0] & 0x01))
    info.set("switch_port_link_aggregation_enabled", bool(data[0] & 0x02))
    info.set("switch_port_link_aggregation_id", struct.unpack_from("!I", data, 1)[0])


def _dot3(info: LLDPInfo, subtype: int, data: bytes) -> None:
    if subtype == 1:
        _exact(data, 5, "MAC/PHY configuration")
        info.set("switch_port_autonegotiation_support", bool(data[0] & 0x01))
        info.set("switch_port_autonegotiation_enabled", bool(data[0] & 0x02))
        info.set("switch_port_mau_type", _u16(data, 3))
    elif subtype == 3:
        _link_aggregation(info, data)
    elif subtype == 4:
        info.set("switch_port_mtu", _u16(data))


def _decode(info: LLDPInfo, tlv_type: int, data: bytes) -> None:
    if tlv_type == CHASSIS_ID:
        subtype, value = _id_value(data, _CHASSIS_MAC, _CHASSIS_ADDR)
        if "switch_chassis_id" not in info.fields:
            info.chassis_id_is_mac = subtype == _CHASSIS_MAC
        info.set("switch_chassis_id", value)
    elif tlv_type == PORT_ID:
        info.set("switch_port_id", _id_value(data, _PORT_MAC, _PORT_ADDR)[1])
    elif tlv_type == PORT_DESC:
        info.set("switch_port_description", _text(data))
    elif tlv_type == SYS_NAME:
        info.set("switch_system_name", _text(data))
    elif tlv_type == SYS_DESC:
        info.set("switch_system_description", _text(data))
    elif tlv_type == SYS_CAPS:
        _exact(data, 4, "system capabilities")
        info.set("switch_capabilities_support", _capabilities(_u16(data)))
        info.set("switch_capabilities_enabled", _capabilities(_u16(data, 2)))
    elif tlv_type == MGMT_ADDR:
        if not data or len(data) < 1 + data[0] or data[0] < 2:
            raise TLVError("management address TLV too short")
        info.append("switch_mgmt_addresses", _iana_address(data[1:1 + data[0]]))
    elif tlv_type == ORG_SPECIFIC:
        if len(data) < 4:
            raise TLVError("organisationally specific TLV too short")
        oui, subtype = data[:3].hex(), data[3]
        if oui == OUI_8021:
            _dot1(info, subtype, data[4:])
        elif oui == OUI_8023:
            _dot3(info, subtype, data[4:])


def parse_tlvs(tlvs: Any) -> LLDPInfo:
    """Decode a list of ``[type, hex]`` pairs; undecodable TLVs become warnings."""
    info = LLDPInfo()
    if not isinstance(tlvs, list):
        info.warnings.append(f"LLDP data must be a list of [type, hex value] pairs, got "
                             f"{type(tlvs).__name__}")
        return info
    for index, tlv in enumerate(tlvs):
        if (not isinstance(tlv, list | tuple) or len(tlv) != 2
                or not isinstance(tlv[0], int) or isinstance(tlv[0], bool)
                or not isinstance(tlv[1], str)):
            info.warnings.append(f"TLV {index} is not a [type, hex value] pair: {tlv!r:.80}")
            continue
        tlv_type, hex_value = tlv
        try:
            data = bytes.fromhex(hex_value)
        except ValueError:
            info.warnings.append(f"TLV {index} (type {tlv_type}) value is not hexadecimal: "
                                 f"{hex_value!r:.80}")
            continue
        if len(data) > MAX_VALUE_LEN:
            info.warnings.append(f"TLV {index} (type {tlv_type}) is longer than "
                                 f"{MAX_VALUE_LEN} bytes")
            continue
        try:
            _decode(info, tlv_type, data)
        except (TLVError, ValueError, struct.error) as exc:
            info.warnings.append(f"TLV {index} (type {tlv_type}) cannot be decoded: {exc}")
    return info


def interface_tlvs(interface: dict, plugin_data: dict) -> Any:
    """An interface's raw TLVs: ``plugin_data['lldp_raw'][name]``, else ``interface['lldp']``."""
    raw = plugin_data.get("lldp_raw")
    tlvs = raw.get(interface.get("name")) if isinstance(raw, dict) else None
    return tlvs if tlvs else interface.get("lldp")


def parse_interface(interface: dict, plugin_data: dict, node_ident: str) -> LLDPInfo | None:
    """Parse an interface's LLDP data, logging what cannot be decoded; None if it has none."""
    name = for_log(interface.get("name"))
    tlvs = interface_tlvs(interface, plugin_data)
    if tlvs is None:
        LOG.debug("No LLDP data for interface %s of node %s", name, node_ident)
        return None
    info = parse_tlvs(tlvs)
    for warning in info.warnings:
        LOG.warning("Node %s, interface %s: LLDP %s", node_ident, name, for_log(warning))
    return info
