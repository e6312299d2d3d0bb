"""Text from the ramdisk (its error, interface names) with NUL, newlines and other control
characters: the failure is recorded on every database, and log lines cannot be forged."""

import logging

import pytest

from inspection.common.untrusted import MAX_LAST_ERROR, for_log, for_storage
from tests.integration.node_factory import add_node, node_row
from tests.integration.pipeline_support import body, service_for

DELL = "uefi-dell-r640"
MAC = "b0:7b:25:d3:0a:11"
NASTY = "disk\x00 gone\nFAKE 2026-01-01 INFO forged line\r\x1b[31m\x7f\x85\u2028end"


def _waiting(engine):
    return add_node(engine, macs=[MAC], inspect_interface="agent",
                    target_provision_state="manageable")


def _one_line_records(caplog) -> list[str]:
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("inspection")]
    for message in messages:
        assert "\n" not in message and "\r" not in message and "\x00" not in message, message
    return messages


def test_ramdisk_error_with_control_characters_fails_the_node(db_engine, tmp_path, caplog):
    node = _waiting(db_engine)
    service = service_for(db_engine, tmp_path)
    data = body(DELL)
    data["error"] = NASTY + "x" * 100_000
    with caplog.at_level(logging.INFO):
        accepted = service.accept(data)
        service.process(accepted.node_uuid, accepted.data)
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "inspect failed" and row.reservation is None
    error = row.last_error
    assert error.startswith("Ramdisk reported error: disk\ufffd gone FAKE 2026-01-01 INFO "
                            "forged line \ufffd[31m\ufffd\ufffd\u2028end")
    assert len(error) == MAX_LAST_ERROR and error.endswith("...")
    messages = _one_line_records(caplog)
    failed = [m for m in messages if "failed: Ramdisk reported error" in m]
    assert len(failed) == 1 and "disk\\x00 gone\\nFAKE" in failed[0]
    assert service.notifier.denied() == [[MAC]]


def test_interface_names_with_control_characters_fail_cleanly(db_engine, tmp_path, caplog):
    node = _waiting(db_engine)
    service = service_for(db_engine, tmp_path)  # add_ports=pxe
    data = body(DELL)
    interfaces = data["inventory"]["interfaces"]
    for index, iface in enumerate(interfaces):
        if iface["name"] != "lo":
            iface["name"] = f"eth{index}\x00\nFORGED INFO line"
    interfaces.append({"name": "bad\nMAC INFO forged", "mac_address": "zz"})
    data["inventory"]["boot"]["pxe_interface"] = "52:54:00:99:99:99"  # matches none
    with caplog.at_level(logging.DEBUG):
        accepted = service.accept(data)
        service.process(accepted.node_uuid, accepted.data)
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "inspect failed", row.last_error
    assert "\x00" not in row.last_error and "\n" not in row.last_error
    assert "eth1\ufffd FORGED INFO line" in row.last_error
    assert "add_ports=pxe" in row.last_error
    messages = _one_line_records(caplog)
    assert any("skipping interface bad\\nMAC INFO forged" in m for m in messages), messages


def test_discovered_node_records_a_nasty_error_and_stays_enrolled(db_engine, tmp_path):
    service = service_for(db_engine, tmp_path, auto_discovery={"enabled": True})
    data = body(DELL)
    data["error"] = NASTY
    accepted = service.accept(data)
    service.process(accepted.node_uuid, accepted.data)
    from inspection.reservation import find_node_id  # noqa: PLC0415

    row = node_row(db_engine, find_node_id(db_engine, accepted.node_uuid))
    assert row.provision_state == "enroll"
    assert row.last_error == "Ramdisk reported error: " + for_storage(NASTY)
    assert "\x00" not in row.last_error


@pytest.mark.parametrize(("value", "expected"), [
    ("eth0", "eth0"),
    ("a\nb\r\tc\x00d\x1b\x7f\x9f", "a\\nb\\r\\tc\\x00d\\x1b\\x7f\\x9f"),
    ("\ud800x\u2028y", "\\ud800x\\u2028y"),
    (["x\ny"], "['x\\ny']"),  # non-strings: their repr, already escaped
    ("é ünïcode ok", "é ünïcode ok"),
])
def test_for_log_escapes_control_characters(value, expected):
    assert for_log(value) == expected


def test_for_log_and_for_storage_truncate():
    assert len(for_log("\n" * 10_000)) == 500
    assert for_log("y" * 600).endswith("...")
    assert for_storage("z" * 5000, 100) == "z" * 97 + "..."
    assert for_storage("a\x00b\nc\ud800") == "a\ufffdb c\ufffd"


def test_secrets_in_a_ramdisk_error_are_masked_in_last_error_and_logs(db_engine, tmp_path,
                                                                     caplog):
    node = _waiting(db_engine)
    service = service_for(db_engine, tmp_path)
    data = body(DELL)
    data["error"] = ("ipmitool -U admin password=Hunter2pw failed; "
                     "redfish https://root:S3cretBMC@10.0.0.5/redfish/v1 refused")
    with caplog.at_level(logging.DEBUG):
        accepted = service.accept(data)
        service.process(accepted.node_uuid, accepted.data)
    row = node_row(db_engine, node["id"])
    assert row.provision_state == "inspect failed"
    assert "password=******" in row.last_error and "root:******@10.0.0.5" in row.last_error
    for secret in ("Hunter2pw", "S3cretBMC"):
        assert secret not in row.last_error and secret not in caplog.text


def test_every_spelling_of_a_secret_in_a_ramdisk_error_is_masked(sqlite_url, tmp_path,
                                                                 caplog):
    from inspection.db import migration  # noqa: PLC0415
    from pxe_filter.common.database import create_engine  # noqa: PLC0415
    from tests.unit.test_secret_text import SPELLINGS  # noqa: PLC0415

    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    node = _waiting(engine)
    service = service_for(engine, tmp_path)
    data = body(DELL)
    data["error"] = "; ".join(text for text, _, _ in SPELLINGS)
    with caplog.at_level(logging.DEBUG):
        accepted = service.accept(data)
        service.process(accepted.node_uuid, accepted.data)
    row = node_row(engine, node["id"])
    engine.dispose()
    assert row.provision_state == "inspect failed"
    for _, secret, kept in SPELLINGS:
        assert secret not in row.last_error and kept in row.last_error, secret
        assert secret not in caplog.text, secret
