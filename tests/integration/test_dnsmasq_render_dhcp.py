"""The rendered dnsmasq configuration serves real DHCP in a network namespace.

dnsmasq runs exactly the file ``install`` wrote (interface mode on the harness
bridge); clients are raw DHCPDISCOVERs carrying the options real firmware sends, so the
boot file each class of client gets is what a machine would really be told to load.
"""

import socket
import struct
import time
from pathlib import Path

import pytest
from oslo_config import cfg

from pxe_filter import conf as filter_conf
from pxe_filter.dnsmasq import config, options, settings
from tests.support import dhcp_client, netns

pytestmark = pytest.mark.netns
pytest_plugins = ["tests.support.dhcp_fixtures"]

ALLOWED, DENIED, UNKNOWN = "52:54:00:aa:00:01", "52:54:00:aa:00:02", "52:54:00:aa:00:03"
SCRIPT = "http://198.18.0.1:8080/inspector.ipxe"
HTTP_BOOT = "http://198.18.0.1:8080/snponly.efi"
_HEADER = 240  # BOOTP fixed part (236 bytes) + the DHCP magic cookie


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    """Render the configuration for the harness bridge and write an allow/deny hostsdir."""
    hostsdir = tmp_path / "hostsdir"
    hostsdir.mkdir()
    (hostsdir / "unknown_hosts_filter").write_text("*:*:*:*:*:*,ignore\n")
    (hostsdir / ALLOWED).write_text(f"{ALLOWED}\n")
    (hostsdir / DENIED).write_text(f"{DENIED},ignore\n")
    conf = cfg.ConfigOpts()
    filter_conf.register_opts(conf)
    options.register_opts(conf)
    conf([], default_config_files=[], default_config_dirs=[])
    conf.set_override("dhcp_hostsdir", str(hostsdir), group="pxe_filter")
    for name, value in {
            "interface": netns.BRIDGE,
            "dhcp_ranges": [f"{netns.RANGE_START},{netns.RANGE_END},{netns.NETMASK}"],
            "no_ping": True, "leasefile": str(tmp_path / "leases"),
            "pid_file": str(tmp_path / "dnsmasq.pid"), "log_facility": "-",
            "ipxe_script_url": SCRIPT, "http_boot_url": HTTP_BOOT}.items():
        conf.set_override(name, value, group="dnsmasq")
    target = tmp_path / "dnsmasq.conf"
    assert render_and_install(conf, target) is True
    return target


def _discover(pair: netns.NetnsPair, mac: str, extra: bytes, timeout: float = 1.0
              ) -> dict[str, object] | None:
    """Send one DISCOVER with ``extra`` options; the offer's address, boot file and options."""
    xid = int(time.monotonic_ns() & 0x7FFFFFFF)
    packet = dhcp_client.build_discover(mac, xid)[:_HEADER]
    packet += bytes([53, 1, 1, 55, 4, 1, 3, 60, 67]) + extra + b"\xff"

    def exchange() -> bytes | None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, pair.client_if.encode())
            sock.bind(("0.0.0.0", 68))
            sock.settimeout(timeout)
            sock.sendto(packet.ljust(300, b"\0"), ("255.255.255.255", 67))
            return dhcp_client.reply_to(sock, xid, timeout)

    data = dhcp_client.run_in_netns(pair.client, exchange)
    if data is None:
        return None
    opts = dhcp_client._parse_options(data[_HEADER:])
    if opts.get(53) != b"\x02":
        return None
    # dnsmasq puts the boot file in option 67 when the client asks for it, else in 'file'.
    boot_file = opts.get(67) or data[108:236]
    return {"yiaddr": socket.inet_ntoa(data[16:20]), "file": boot_file.rstrip(b"\0").decode(),
            "vendor": opts.get(60, b"").decode()}


def _arch(value: int) -> bytes:
    return bytes([93, 2]) + struct.pack("!H", value)


def test_rendered_config_serves_allowed_macs_only(rendered, dnsmasq_factory, netns_pair):
    dnsmasq = dnsmasq_factory(conf_file=rendered)
    offer = _discover(netns_pair, ALLOWED, _arch(0))
    assert offer is not None, dnsmasq.log_text()[-2000:]
    assert dhcp_client.same_subnet(str(offer["yiaddr"]), f"{netns.SERVER_IP}/{netns.PREFIXLEN}")
    assert _discover(netns_pair, DENIED, _arch(0), timeout=0.5) is None
    assert _discover(netns_pair, UNKNOWN, _arch(0), timeout=0.5) is None


@pytest.mark.parametrize("case", [
    (_arch(0), "undionly.kpxe", ""),                        # legacy BIOS PXE ROM
    (_arch(7), "snponly.efi", ""),                          # x86-64 UEFI PXE
    (_arch(9), "snponly.efi", ""),
    (_arch(7) + bytes([77, 4]) + b"iPXE", SCRIPT, ""),      # iPXE, chained from the above
    (_arch(16), HTTP_BOOT, "HTTPClient"),                   # UEFI HTTP boot
    (_arch(6), "", ""),                                     # IA32 UEFI: no file configured
    (b"", "", ""),                                          # no option 93 (the ramdisk)
], ids=["bios", "uefi-arch7", "uefi-arch9", "ipxe", "http-boot", "ia32", "no-arch"])
def test_each_client_class_gets_its_boot_file(rendered, dnsmasq_factory, netns_pair, case):
    extra, boot_file, vendor = case
    dnsmasq = dnsmasq_factory(conf_file=rendered)
    offer = _discover(netns_pair, ALLOWED, extra)
    assert offer is not None, dnsmasq.log_text()[-2000:]
    assert offer["file"] == boot_file
    assert offer["vendor"] == vendor


def render_and_install(conf, target) -> bool:
    """What ``render-dnsmasq-config`` does: render, check with dnsmasq, install."""
    return config.install(config.render(settings.from_conf(conf)), str(target),
                          conf.dnsmasq.binary)
