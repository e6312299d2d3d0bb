"""Rendering the dnsmasq configuration from [dnsmasq]: validation, `dnsmasq --test`, install.

Every rendered variant is checked by the real dnsmasq; configurations come from real ini
files read by oslo.config, as an operator writes them.
"""

import os
import stat
from pathlib import Path

import pytest
from oslo_config import cfg

from pxe_filter import cmd as filter_cmd
from pxe_filter import conf as filter_conf
from pxe_filter.common.config import load
from pxe_filter.dnsmasq import config, settings
from pxe_filter.dnsmasq.settings import DnsmasqConfigError, InvalidSettings

REPO = Path(__file__).resolve().parents[2]
HOSTSDIR = "/var/lib/ironic-pxe-filter/hostsdir"
BASE = {"interface": "eth1", "dhcp_ranges": "192.0.2.100,192.0.2.200,255.255.255.0"}


def write_conf(tmp_path: Path, dnsmasq: dict[str, str | list[str]],
               hostsdir: str | None = HOSTSDIR, raw: str = "") -> Path:
    """An ini file with [pxe_filter]dhcp_hostsdir and the given [dnsmasq] options."""
    lines = ["[pxe_filter]", f"dhcp_hostsdir = {hostsdir}"] if hostsdir is not None else []
    lines.append("[dnsmasq]")
    for key, value in dnsmasq.items():
        for one in value if isinstance(value, list) else [value]:
            lines.append(f"{key} = {one}")
    path = tmp_path / "filter.conf"
    path.write_text("\n".join(lines) + "\n" + raw)
    return path


def make_conf(tmp_path: Path, dnsmasq: dict[str, str | list[str]] | None = None,
              **kwargs) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    filter_conf.register_opts(conf)
    load(conf, [str(write_conf(tmp_path, BASE if dnsmasq is None else dnsmasq, **kwargs))])
    return conf


def rendered(tmp_path: Path, dnsmasq: dict[str, str | list[str]] | None = None,
             **kwargs) -> list[str]:
    """The rendered configuration's option lines, after the real `dnsmasq --test` accepted it."""
    text = config.render(settings.from_conf(make_conf(tmp_path, dnsmasq, **kwargs)))
    config.check(text)
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_interface_mode(tmp_path):
    lines = rendered(tmp_path, {**BASE, "lease_time": "1h", "no_ping": "true"})
    for expected in ["port=0", "interface=eth1", "bind-dynamic",
                     "dhcp-range=192.0.2.100,192.0.2.200,255.255.255.0,1h",
                     f"dhcp-hostsdir={HOSTSDIR}", "dhcp-sequential-ip", "no-ping", "log-dhcp",
                     "dhcp-leasefile=/var/lib/ironic-inspection-dnsmasq/dnsmasq.leases"]:
        assert expected in lines
    assert not any(line.startswith(("enable-tftp", "dhcp-boot=tag:ipxe")) for line in lines)


def test_relay_mode_with_several_tagged_ranges(tmp_path):
    lines = rendered(tmp_path, {
        "mode": "relay",
        "dhcp_ranges": ["198.51.100.10,198.51.100.250,255.255.255.0,leaf1",
                        "203.0.113.10, 203.0.113.120, 255.255.255.128, leaf-2"],
        "sequential_ip": "false"})
    assert [line for line in lines if line.startswith("dhcp-range=")] == [
        "dhcp-range=set:leaf1,198.51.100.10,198.51.100.250,255.255.255.0,10m",
        "dhcp-range=set:leaf-2,203.0.113.10,203.0.113.120,255.255.255.128,10m"]
    assert not any(line.startswith(("interface=", "bind-")) for line in lines)
    assert "dhcp-sequential-ip" not in lines


def test_relay_mode_may_listen_on_one_interface(tmp_path):
    lines = rendered(tmp_path, {"mode": "relay", "interface": "bond0.100",
                                "dhcp_ranges": "198.51.100.10,198.51.100.250,255.255.255.0"})
    assert "interface=bond0.100" in lines


def test_ipv6_range_boots_by_architecture(tmp_path):
    lines = rendered(tmp_path, {**BASE, "dhcp_range_v6": "2001:db8::100,2001:DB8::1ff,64",
                                "ipv6_bootfile_url": "http://[2001:db8::1]:8080/snponly.efi",
                                "ipv6_arm64_bootfile_url": "http://[2001:db8::1]/snp-arm.efi"})
    assert "dhcp-range=2001:db8::100,2001:db8::1ff,64,10m" in lines
    # DHCPv6 carries the architecture in option 61, not in DHCPv4's client-arch.
    assert {"dhcp-match=set:efi64,option6:61,7", "dhcp-match=set:efi64,option6:61,9",
            "dhcp-match=set:efiarm64,option6:61,11"} <= set(lines)
    assert ("dhcp-option=tag:efi64,option6:bootfile-url,http://[2001:db8::1]:8080/snponly.efi"
            in lines)
    assert "dhcp-option=tag:efiarm64,option6:bootfile-url,http://[2001:db8::1]/snp-arm.efi" in lines
    assert not [line for line in lines if line.startswith("dhcp-option=option6:bootfile-url")]


def test_only_clients_matched_by_a_hostsdir_entry_are_served(tmp_path):
    # A client whose MAC dnsmasq cannot learn matches no entry, not even the deny wildcard.
    assert "dhcp-ignore=tag:!known" in rendered(tmp_path, BASE)


def test_ipxe_chaining(tmp_path):
    lines = rendered(tmp_path, {**BASE, "ipxe_script_url": "http://192.0.2.1:8080/boot.ipxe",
                                "tftp_root": "/srv/tftp", "uefi_arm64_bootfile": "snp-arm.efi",
                                "dhcp_range_v6": "2001:db8::100,2001:db8::1ff"})
    assert "dhcp-userclass=set:ipxe,iPXE" in lines
    assert "dhcp-match=set:efi64,option:client-arch,7" in lines
    assert "dhcp-boot=tag:ipxe,http://192.0.2.1:8080/boot.ipxe" in lines
    # Firmware clients (not iPXE yet) get the iPXE build for their architecture.
    assert "dhcp-boot=tag:!ipxe,tag:bios,undionly.kpxe" in lines
    assert "dhcp-boot=tag:!ipxe,tag:efi64,snponly.efi" in lines
    assert "dhcp-boot=tag:!ipxe,tag:efiarm64,snp-arm.efi" in lines
    assert "dhcp-option=tag:ipxe,option6:bootfile-url,http://192.0.2.1:8080/boot.ipxe" in lines
    assert {"enable-tftp", "tftp-root=/srv/tftp"} <= set(lines)


def test_ipxe_over_dhcpv6_gets_its_own_script_url(tmp_path):
    lines = rendered(tmp_path, {**BASE, "ipxe_script_url": "http://192.0.2.1:8080/boot.ipxe",
                                "ipv6_ipxe_script_url": "http://[2001:db8::1]:8080/boot.ipxe",
                                "ipv6_bootfile_url": "http://[2001:db8::1]:8080/snponly.efi",
                                "dhcp_range_v6": "2001:db8::100,2001:db8::1ff"})
    assert "dhcp-boot=tag:ipxe,http://192.0.2.1:8080/boot.ipxe" in lines  # DHCPv4 unchanged
    v6 = [line for line in lines if "option6:bootfile-url" in line]
    assert v6 == ["dhcp-option=tag:ipxe,option6:bootfile-url,http://[2001:db8::1]:8080/boot.ipxe",
                  "dhcp-option=tag:!ipxe,tag:efi64,option6:bootfile-url,"
                  "http://[2001:db8::1]:8080/snponly.efi"]


def test_without_ipxe_script_every_client_gets_its_boot_file(tmp_path):
    lines = rendered(tmp_path, {**BASE, "bios_bootfile": "pxelinux.0",
                                "uefi_bootfile": "grub/shimx64.efi",
                                "tftp_server": "192.0.2.5"})
    boots = [line for line in lines if line.startswith("dhcp-boot=")]
    assert boots == [
        "dhcp-boot=tag:bios,pxelinux.0,,192.0.2.5",
        "dhcp-boot=tag:efi64,grub/shimx64.efi,,192.0.2.5"]


def test_http_boot(tmp_path):
    lines = rendered(tmp_path, {**BASE, "http_boot_url": "https://boot.example.com/ipxe.efi",
                                "bios_bootfile": "", "uefi_bootfile": ""})
    assert "dhcp-match=set:httpboot,option:client-arch,16" in lines
    assert "dhcp-option-force=tag:httpboot,60,HTTPClient" in lines
    assert [line for line in lines if line.startswith("dhcp-boot=")] == [
        "dhcp-boot=tag:httpboot,https://boot.example.com/ipxe.efi"]


def test_logging_user_and_pid_file(tmp_path):
    lines = rendered(tmp_path, {**BASE, "log_dhcp": "false", "log_facility": "LOCAL0",
                                "user": "dnsmasq", "pid_file": ""})
    assert "log-dhcp" not in lines
    assert {"log-facility=LOCAL0", "user=dnsmasq"} <= set(lines)
    assert "pid-file=" in lines  # empty: no pid file, not dnsmasq's /run/dnsmasq.pid


def test_sample_configuration_renders_and_passes_dnsmasq(tmp_path):
    filter_file = tmp_path / "filter.conf"
    filter_file.write_text(f"[pxe_filter]\ndhcp_hostsdir = {HOSTSDIR}\n")
    conf = cfg.ConfigOpts()
    filter_conf.register_opts(conf)
    load(conf, [str(filter_file), str(REPO / "etc/ironic-pxe-filter/dnsmasq-sample.conf")])
    text = config.render(settings.from_conf(conf))
    config.check(text)
    assert "dhcp-boot=tag:ipxe,http://192.0.2.1:8080/inspector.ipxe" in text.splitlines()


INVALID = [
    ({"interface": "eth1", "dhcp_ranges": "192.0.2.300,192.0.2.310"},
     "'192.0.2.300' is not an IPv4 address"),
    ({"interface": "eth1", "dhcp_ranges": "192.0.2.200,192.0.2.100"},
     "start 192.0.2.200 is after end 192.0.2.100"),
    ({"interface": "eth1", "dhcp_ranges": "2001:db8::1,2001:db8::9"},
     "'2001:db8::1' is not an IPv4 address"),
    ({"interface": "eth1", "dhcp_ranges": "192.0.2.10,192.0.3.10,255.255.255.0"},
     "not in the same 192.0.2.0/24 subnet"),
    ({"interface": "eth1", "dhcp_ranges": "192.0.2.10,192.0.2.20,255.0.255.0"},
     "'255.0.255.0' is not a netmask"),
    ({"interface": "eth1", "dhcp_ranges": "192.0.2.10"}, "expected 'start,end[,netmask][,tag]'"),
    ({"interface": "eth1", "dhcp_ranges": ["192.0.2.10,192.0.2.50", "192.0.2.40,192.0.2.60"]},
     "192.0.2.10-192.0.2.50 overlaps 192.0.2.40-192.0.2.60"),
    ({"interface": "eth1", "dhcp_ranges": "192.0.2.10,192.0.2.50,ipxe"},
     "tag 'ipxe' is used by the template"),
    ({"interface": "eth1", "dhcp_ranges": "192.0.2.10,192.0.2.50,leaf#1"}, "tag 'leaf#1'"),
    ({"mode": "relay", "dhcp_ranges": "198.51.100.10,198.51.100.20"},
     "relay mode needs a netmask"),
    ({"mode": "bridge", **BASE}, "Valid values are [interface, relay], but found 'bridge'"),
    ({"dhcp_ranges": "192.0.2.10,192.0.2.50"}, "[dnsmasq]interface is required"),
    ({"interface": "eth1"}, "at least one IPv4 range is required"),
    ({"interface": "eth 1", "dhcp_ranges": "192.0.2.10,192.0.2.50"}, "expected an interface"),
    ({**BASE, "lease_time": "90"}, "minimum lease time is 2 minutes"),
    ({**BASE, "lease_time": "1 day"}, "expected seconds"),
    ({**BASE, "dhcp_range_v6": "2001:db8::9,2001:db8::1"}, "start 2001:db8::9 is after end"),
    ({**BASE, "dhcp_range_v6": "2001:db8::1,2001:db8::9,48"}, "prefix length must be a number"),
    ({**BASE, "ipv6_bootfile_url": "tftp://[2001:db8::1]/x"}, "without dhcp_range_v6"),
    ({**BASE, "ipv6_arm64_bootfile_url": "tftp://[2001:db8::1]/x"}, "without dhcp_range_v6"),
    ({**BASE, "ipv6_ipxe_script_url": "http://[2001:db8::1]/x"}, "without dhcp_range_v6"),
    ({**BASE, "dhcp_range_v6": "2001:db8::1,2001:db8::9",
      "ipv6_ipxe_script_url": "tftp://[2001:db8::1]/x"}, "starting with http or https"),
    ({**BASE, "ipxe_script_url": "http://192.0.2.1/boot.ipxe,extra"}, "without spaces, commas"),
    ({**BASE, "ipxe_script_url": "ftp://192.0.2.1/boot.ipxe"}, "starting with http or https"),
    ({**BASE, "http_boot_url": "/ipxe.efi"}, "starting with http or https"),
    ({**BASE, "bios_bootfile": "undionly.kpxe #x"}, "expected a boot file name"),
    ({**BASE, "tftp_root": "srv/tftp"}, "expected an absolute path"),
    ({**BASE, "tftp_root": "/srv/tftp", "tftp_server": "192.0.2.5"}, "both set"),
    ({**BASE, "tftp_server": "tftp.example.com"}, "is not an IPv4 address"),
    ({**BASE, "log_facility": "loud"}, "expected a syslog facility"),
    ({**BASE, "user": "Root User"}, "expected a user name"),
    ({**BASE, "leasefile": ""}, "[dnsmasq]leasefile is required"),
]


@pytest.mark.parametrize(("values", "message"), INVALID)
def test_invalid_values_are_refused_with_a_clear_error(tmp_path, values, message):
    conf = make_conf(tmp_path, values)
    with pytest.raises(InvalidSettings) as info:
        config.render(settings.from_conf(conf))
    assert message in str(info.value)


def test_every_problem_is_reported_at_once(tmp_path):
    conf = make_conf(tmp_path, {"dhcp_ranges": "192.0.2.9,192.0.2.1", "lease_time": "1"},
                     hostsdir="")
    with pytest.raises(InvalidSettings) as info:
        config.render(settings.from_conf(conf))
    assert len(info.value.problems) == 4  # interface, range, lease time, hostsdir


def test_empty_hostsdir_is_refused(tmp_path):
    with pytest.raises(InvalidSettings, match=r"\[pxe_filter\]dhcp_hostsdir is not set"):
        config.render(settings.from_conf(make_conf(tmp_path, hostsdir="")))


@pytest.mark.parametrize("option", ["interface", "dhcp_ranges", "ipxe_script_url", "tftp_root",
                                    "lease_time", "user", "dhcp_range_v6"])
def test_newline_in_any_value_is_refused(tmp_path, option):
    # oslo.config joins an indented continuation line with "\n": a way to smuggle an option.
    values = {key: value for key, value in BASE.items() if key != option}
    conf = make_conf(tmp_path, values, raw=f"{option} = x\n  dhcp-range=0.0.0.0,255.255.255.255\n")
    with pytest.raises(InvalidSettings, match=rf"\[dnsmasq\]{option}: .*contains a newline"):
        config.render(settings.from_conf(conf))


def test_newline_in_the_hostsdir_is_refused(tmp_path):
    conf = make_conf(tmp_path, hostsdir="/srv/hosts\n  dhcp-range=0.0.0.0,255.255.255.255")
    with pytest.raises(InvalidSettings, match=r"\[pxe_filter\]dhcp_hostsdir = .*: expected an "
                                              r"absolute path"):
        config.render(settings.from_conf(conf))


def test_dnsmasq_test_really_rejects_bad_configuration():
    with pytest.raises(config.DnsmasqTestFailed, match="bad option at line 2"):
        config.check("port=0\nno-such-option\n")


def test_install_is_atomic_0644_and_reports_changes(tmp_path):
    target = tmp_path / "etc" / "dnsmasq.conf"
    target.parent.mkdir()
    conf = make_conf(tmp_path)
    old_umask = os.umask(0o077)  # the file must stay readable by dnsmasq whatever the umask
    try:
        assert render_and_install(conf, target) is True
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.read_text() == config.render(settings.from_conf(conf))
    inode = target.stat().st_ino
    assert render_and_install(conf, target) is False
    assert target.stat().st_ino == inode  # unchanged: not rewritten
    conf.set_override("lease_time", "1h", group="dnsmasq")
    assert render_and_install(conf, target) is True
    assert target.stat().st_ino != inode  # replaced by rename, never rewritten in place
    assert "dhcp-range=192.0.2.100,192.0.2.200,255.255.255.0,1h" in target.read_text()
    assert os.listdir(target.parent) == ["dnsmasq.conf"]


def test_configuration_refused_by_dnsmasq_keeps_the_old_file(tmp_path):
    target = tmp_path / "dnsmasq.conf"
    target.write_text("# the running configuration\nport=0\n")
    template = tmp_path / "broken.j2"
    template.write_text("port=0\ndhcp-range={{ s.ranges[0].start }},{{ s.ranges[0].end }}\n"
                        "bogus-option=1\n")
    conf = make_conf(tmp_path, {**BASE, "template": str(template)})
    with pytest.raises(config.DnsmasqTestFailed) as info:
        render_and_install(conf, target)
    assert "line 3: 'bogus-option=1'" in str(info.value)
    assert "bad option" in str(info.value)
    assert target.read_text() == "# the running configuration\nport=0\n"
    assert sorted(os.listdir(tmp_path)) == ["broken.j2", "dnsmasq.conf", "filter.conf"]


def test_invalid_values_keep_the_old_file(tmp_path):
    target = tmp_path / "dnsmasq.conf"
    target.write_text("port=0\n")
    conf = make_conf(tmp_path, {**BASE, "dhcp_ranges": "192.0.2.9,192.0.2.1"})
    with pytest.raises(InvalidSettings):
        render_and_install(conf, target)
    assert target.read_text() == "port=0\n"


def test_install_into_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(DnsmasqConfigError, match=r"cannot write in .*/missing"):
        config.install("port=0\n", str(tmp_path / "missing" / "dnsmasq.conf"))


def test_broken_template_is_a_clear_error(tmp_path):
    template = tmp_path / "t.j2"
    template.write_text("port=0\n{{ s.no_such_setting }}\n")
    conf = make_conf(tmp_path, {**BASE, "template": str(template)})
    with pytest.raises(DnsmasqConfigError, match=r"cannot render .*no_such_setting"):
        config.render(settings.from_conf(conf))


def render_command(*argv: str) -> int:
    return filter_cmd.main(["render-dnsmasq-config", *argv])


def test_command_writes_then_reports_unchanged(tmp_path, capsys):
    path = write_conf(tmp_path, BASE)
    target = tmp_path / "out.conf"
    argv = ["--config-file", str(path), "--output", str(target)]
    assert render_command(*argv) == 0
    assert capsys.readouterr().out == f"{target}: written\n"
    assert render_command(*argv) == 0
    assert capsys.readouterr().out == f"{target}: unchanged\n"
    assert "dhcp-hostsdir=" + HOSTSDIR in target.read_text().splitlines()


def test_command_creates_the_directories_it_installs_into(tmp_path, capsys):
    root = tmp_path / "fresh"
    path = write_conf(tmp_path, {**BASE, "config_file": str(root / "lib/filter/dnsmasq.conf"),
                                 "leasefile": str(root / "lib/dnsmasq/leases"),
                                 "pid_file": str(root / "run/dnsmasq/pid")})
    assert render_command("--config-file", str(path)) == 0
    assert (root / "lib/filter/dnsmasq.conf").is_file()
    for directory in ("lib", "lib/filter", "lib/dnsmasq", "run/dnsmasq"):
        assert (root / directory).stat().st_mode & 0o777 == 0o755  # dnsmasq's user reads
    assert not (root / "lib/dnsmasq/leases").exists()  # dnsmasq's to create


def test_command_check_only_and_stdout_write_nothing(tmp_path, capsys):
    path = write_conf(tmp_path, {**BASE, "config_file": str(tmp_path / "never.conf")})
    assert render_command("--config-file", str(path), "--check-only") == 0
    assert "valid" in capsys.readouterr().out
    assert render_command("--config-file", str(path), "--output", "-") == 0
    assert "interface=eth1\n" in capsys.readouterr().out
    assert not (tmp_path / "never.conf").exists()


def test_command_reports_invalid_values_without_traceback(tmp_path, capsys):
    target = tmp_path / "out.conf"
    target.write_text("port=0\n")
    path = write_conf(tmp_path, {**BASE, "dhcp_ranges": "192.0.2.9,192.0.2.1"})
    assert render_command("--config-file", str(path), "--output", str(target)) == 1
    err = capsys.readouterr().err
    assert "start 192.0.2.9 is after end 192.0.2.1" in err
    assert "nothing was written" in err and "Traceback" not in err
    assert target.read_text() == "port=0\n"


def test_command_missing_config_file(tmp_path, capsys):
    assert render_command("--config-file", str(tmp_path / "nope.conf")) == 2
    assert "cannot read configuration file" in capsys.readouterr().err


def test_template_shipped_in_etc_is_the_default():
    assert config.find_template() == REPO / "etc" / "dnsmasq" / "dnsmasq.conf.j2"


def test_dnsmasq_binary_missing_is_a_clear_error():
    with pytest.raises(DnsmasqConfigError, match="not found: install dnsmasq-base"):
        config.check("port=0\n", binary="no-such-dnsmasq")


def render_and_install(conf, target) -> bool:
    """What ``render-dnsmasq-config`` does: render, check with dnsmasq, install."""
    return config.install(config.render(settings.from_conf(conf)), str(target),
                          conf.dnsmasq.binary)
