"""Real dnsmasq obeys --dhcp-hostsdir files, as the PXE filter relies on (no daemon here)."""

import os
import shutil
import subprocess
import time

import pytest

from pxe_filter.hostsdir import HostsDir
from tests.support import services
from tests.support.dhcp_client import same_subnet
from tests.support.netns import SERVER_IP

pytestmark = pytest.mark.netns
pytest_plugins = ["tests.support.dhcp_fixtures"]

ALLOWED = "52:54:00:aa:00:01"
DENIED = "52:54:00:aa:00:02"
UNKNOWN = "52:54:00:aa:00:03"
WILDCARD = "unknown_hosts_filter"


def write_atomically(path, content):
    """Write a hostsdir file the safe way: dotfile temp, mode 0644, rename into place."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(content)
    os.chmod(temp, 0o644)
    os.replace(temp, path)


def allow(directory, mac):
    write_atomically(directory / mac, f"{mac}\n")


def deny(directory, mac):
    write_atomically(directory / mac, f"{mac},ignore\n")


def test_allow_file_gets_offer_and_ignore_file_gets_none(hostsdir, dnsmasq_factory,
                                                         dhcp_client):
    allow(hostsdir, ALLOWED)
    deny(hostsdir, DENIED)
    dnsmasq = dnsmasq_factory(hostsdir)

    offer = dhcp_client.discover(ALLOWED)
    assert offer is not None and offer.mac == ALLOWED
    assert offer.server_id == SERVER_IP
    assert same_subnet(offer.yiaddr, f"{SERVER_IP}/16")
    assert dhcp_client.discover(DENIED, control=ALLOWED) is None
    # Judged by dnsmasq, not lost on the way: it logged the refusal.
    dnsmasq.wait_for_log(rf"DHCPDISCOVER\(br0\) {DENIED} ignored")


@pytest.mark.parametrize("ignore", [True, False], ids=["deny-unknown", "allow-unknown"])
def test_wildcard_decides_for_macs_without_a_file(hostsdir, dnsmasq_factory, dhcp_client,
                                                  ignore):
    allow(hostsdir, ALLOWED)
    deny(hostsdir, DENIED)
    write_atomically(hostsdir / WILDCARD, "*:*:*:*:*:*,ignore\n" if ignore else "*:*:*:*:*:*\n")
    dnsmasq_factory(hostsdir)

    unknown = dhcp_client.discover(UNKNOWN, control=ALLOWED)
    assert (unknown is None) == ignore
    # A MAC's own file wins over the wildcard in both directions.
    assert dhcp_client.discover(ALLOWED) is not None
    assert dhcp_client.discover(DENIED, control=ALLOWED) is None


def test_rename_flips_apply_within_a_second_without_sighup(hostsdir, dnsmasq_factory,
                                                           dhcp_client):
    allow(hostsdir, ALLOWED)
    allow(hostsdir, DENIED)
    write_atomically(hostsdir / WILDCARD, "*:*:*:*:*:*,ignore\n")
    dnsmasq_factory(hostsdir)
    assert dhcp_client.discover(DENIED) is not None

    deny(hostsdir, DENIED)
    took_deny = dhcp_client.await_offer(DENIED, offered=False, within=1.0, control=ALLOWED)
    allow(hostsdir, DENIED)
    took_allow = dhcp_client.await_offer(DENIED, offered=True, within=1.0)

    print(f"allow->deny applied in {took_deny * 1000:.1f} ms, "
          f"deny->allow in {took_allow * 1000:.1f} ms")


def test_real_client_follows_the_files(netns_pair, hostsdir, dnsmasq_factory, dhcp_client):
    """busybox udhcpc on the interface's own MAC sees what the test client sees."""
    if shutil.which("busybox") is None:
        services.unavailable("busybox udhcpc", "busybox not found (Debian: busybox)")
    iface = netns_pair.add_client_interface() if len(netns_pair.client_ifs) < 2 \
        else netns_pair.client_ifs[1]
    mac = netns_pair.client_mac(iface)
    write_atomically(hostsdir / WILDCARD, "*:*:*:*:*:*,ignore\n")
    deny(hostsdir, mac)
    allow(hostsdir, ALLOWED)
    dnsmasq_factory(hostsdir)

    def udhcpc(tries: int) -> str:
        # -s /bin/true: report the lease, configure nothing.
        argv = netns_pair.exec_argv(netns_pair.client, [
            "busybox", "udhcpc", "-i", iface, "-n", "-q", "-f", "-t", str(tries), "-T", "1",
            "-s", "/bin/true"])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=15)
        return proc.stdout + proc.stderr

    assert "obtained" not in udhcpc(tries=1)
    assert dhcp_client.discover(mac, control=ALLOWED) is None
    allow(hostsdir, mac)
    time.sleep(0.05)
    out = udhcpc(tries=3)
    assert "obtained" in out, out
    assert dhcp_client.discover(mac) is not None


def test_a_file_created_in_place_is_no_entry_until_closed(hostsdir, dnsmasq_factory,
                                                          dhcp_client):
    """What HostsDir relies on to create a new MAC file without a rename (issue 22)."""
    write_atomically(hostsdir / WILDCARD, "*:*:*:*:*:*\n")  # unknown MACs are served
    allow(hostsdir, ALLOWED)
    dnsmasq = dnsmasq_factory(hostsdir)
    # The writer between its create and its write: an empty file, even re-read on SIGHUP,
    # is no entry at all (the wildcard decides, as before the file existed).
    fd = os.open(hostsdir / DENIED, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        dnsmasq.sighup()
        dhcp_client.await_offer(DENIED, offered=True, within=2.0)
        os.write(fd, f"{DENIED},ignore\n".encode())
    finally:
        os.close(fd)
    # The close (IN_CLOSE_WRITE) makes dnsmasq read the whole line: no SIGHUP needed.
    dhcp_client.await_offer(DENIED, offered=False, within=1.0, control=ALLOWED)
    writer = HostsDir(str(hostsdir))
    writer.scan()
    writer.write(UNKNOWN, False)  # a new file: created in place
    assert not os.path.exists(hostsdir / f".{UNKNOWN}.tmp")
    dhcp_client.await_offer(UNKNOWN, offered=False, within=1.0, control=ALLOWED)
    writer.close()
