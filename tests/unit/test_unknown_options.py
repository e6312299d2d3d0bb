"""Misspelled options and sections are named at start; a bad value names its section."""

import logging
from pathlib import Path

import pytest
from oslo_config import cfg

from inspection import conf as inspection_conf
from pxe_filter import conf as filter_conf
from pxe_filter.common import config, logs
from pxe_filter.common.unknown_options import (
    LIBRARY_SECTIONS,
    PROJECT_NAMESPACES,
    namespace_options,
    warn_unknown_options,
)

ETC = Path(__file__).resolve().parents[2] / "etc"
SHIPPED = [ETC / "ironic-inspection/shared.conf", ETC / "ironic-pxe-filter/ironic-pxe-filter.conf",
           ETC / "ironic-inspection/ironic-inspection.conf",
           ETC / "ironic-pxe-filter/dnsmasq-sample.conf"]
LOG = logging.getLogger("test.unknown_options")


def _conf(service: str, files, dirs=()) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    logs.register_options(conf, "test")
    (filter_conf if service == "ironic-pxe-filter" else inspection_conf).register_opts(conf)
    config.load(conf, [str(f) for f in files], [str(d) for d in dirs])
    return conf


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _warnings(service: str, files, dirs=()) -> list[str]:
    # oslo.log owns the root logger's handlers (pytest's caplog among them): listen here.
    conf = _conf(service, files, dirs)
    records = _Records()
    LOG.addHandler(records)
    try:
        returned = warn_unknown_options(conf, LOG, service)
    finally:
        LOG.removeHandler(records)
    assert records.lines == returned
    return records.lines


@pytest.mark.parametrize("service", ["ironic-pxe-filter", "ironic-inspection"])
def test_misspellings_are_named_with_the_closest_name(tmp_path, service):
    bad = tmp_path / "bad.conf"
    bad.write_text("[DEFAULT]\ndebugg = true\n[pxe_filter]\nsync_perod = 5\n"
                   "[database]\nconection = sqlite://\n[nosuchsection]\nx = 1\n"
                   "[pxe_filtr]\nsync_period = 5\n")
    lines = _warnings(service, [bad])
    assert f"Unknown option [DEFAULT]debugg in {bad}: ignored, fix or remove it " \
           "(did you mean debug?)" in lines
    assert f"Unknown option [database]conection in {bad}: ignored, fix or remove it " \
           "(did you mean connection?)" in lines
    assert f"Unknown section [nosuchsection] in {bad}: ignored, fix or remove it" in lines
    assert f"Unknown section [pxe_filtr] in {bad}: ignored, fix or remove it " \
           "(did you mean pxe_filter?)" in lines
    # [pxe_filter] is the filter's section, but the inspection service reads one option of
    # it and knows the filter's: both name the misspelling.
    assert f"Unknown option [pxe_filter]sync_perod in {bad}: ignored, fix or remove it " \
           "(did you mean sync_period?)" in lines
    assert len(lines) == 5


def test_a_service_never_flags_another_services_options(tmp_path):
    extra = tmp_path / "conf.d"
    extra.mkdir()
    # Sections of the other service, and of a library whose options are not all listed
    # (keystoneauth's plugin options): known, never flagged.
    (extra / "more.conf").write_text(
        "[api]\nport = 6386\n[worker]\nprometheus_port = 9101\n[dnsmasq]\ninterface = eth1\n"
        "[keystone_authtoken]\nauth_type = password\nusername = ironic\n"
        "[oslo_messaging_rabbit]\nheartbeat_timeout_threshold = 30\n")
    for service in ("ironic-pxe-filter", "ironic-inspection"):
        assert _warnings(service, SHIPPED, [extra]) == []


def test_a_config_dir_file_is_checked_too(tmp_path):
    (tmp_path / "typo.conf").write_text("[api]\nprot = 1\n")
    lines = _warnings("ironic-inspection", [], [tmp_path])
    assert lines == [f"Unknown option [api]prot in {tmp_path / 'typo.conf'}: ignored, fix or "
                     "remove it (did you mean port?)"]


def test_a_bad_value_names_section_option_and_file(tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text("[pxe_filter]\nsync_period = abc\n")
    conf = _conf("ironic-pxe-filter", [bad])
    with pytest.raises(config.ConfigError) as caught:
        logs.log_option_values(conf, LOG)
    assert str(caught.value) == (f"invalid value of [pxe_filter]sync_period in {bad}: "
                                 "invalid literal for int() with base 10: 'abc'")


def test_every_section_of_the_generated_samples_is_known():
    # The generator configurations list every namespace whose options a file may hold.
    listed = set()
    for generator in ETC.glob("*/*-config-generator.conf"):
        listed |= {line.split("=", 1)[1].strip() for line in generator.read_text().splitlines()
                   if line.startswith("namespace")}
    assert set(PROJECT_NAMESPACES) <= listed
    sections = set(namespace_options(listed))
    assert sections <= set(namespace_options(PROJECT_NAMESPACES)) | LIBRARY_SECTIONS
