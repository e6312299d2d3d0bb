"""The capabilities string helpers the hooks and the rules engine share."""

import pytest

from inspection.common.capabilities import (
    CapabilitiesError,
    format_capabilities,
    parse_capabilities,
    update_capabilities,
)


@pytest.mark.parametrize(("raw", "expected"), [
    (None, {}),
    ("", {}),
    ("boot_mode:uefi", {"boot_mode": "uefi"}),
    ("a:1,b:2", {"a": "1", "b": "2"}),
    ("a:1,,b:2,", {"a": "1", "b": "2"}),
    (" a : 1 , b:x:y", {"a": "1", "b": "x:y"}),
    ("a:1,b:2,a:3", {"a": "3", "b": "2"}),
    ({"a": True, "b": 2}, {"a": "true", "b": "2"}),
])
def test_parse(raw, expected):
    assert parse_capabilities(raw) == expected


@pytest.mark.parametrize("raw", ["boot_option", "a:1,b", ":x", 42])
def test_parse_malformed_is_a_clear_error(raw):
    with pytest.raises(CapabilitiesError, match="capabilities"):
        parse_capabilities(raw)


def test_update_in_place_without_duplicates():
    current = "boot_mode:bios,cpu_vt:true,profile:compute"
    assert update_capabilities(current, {"boot_mode": "uefi", "cpu_aes": "true"}) == \
        "boot_mode:uefi,cpu_vt:true,profile:compute,cpu_aes:true"
    # Applying the same update twice changes nothing.
    once = update_capabilities(current, {"cpu_vt": "true"})
    assert update_capabilities(once, {"cpu_vt": "true"}) == once == current


def test_update_removes_and_collapses_duplicates():
    assert update_capabilities("a:1,gpu:2,a:2", {}, remove=["gpu"]) == "a:2"


@pytest.mark.parametrize("caps", [{"a,b": "1"}, {"a:b": "1"}, {"a": "x,y"}, {"": "1"}])
def test_format_refuses_what_cannot_round_trip(caps):
    with pytest.raises(CapabilitiesError):
        format_capabilities(caps)
