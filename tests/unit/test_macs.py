"""MAC validation and normalisation: the gate every MAC passes before it names a file."""

import pytest

from pxe_filter.common.macs import InvalidMAC, is_canonical, normalize_mac, split_valid


@pytest.mark.parametrize(("raw", "expected"), [
    ("52:54:00:12:34:56", "52:54:00:12:34:56"),
    ("52:54:00:AB:CD:EF", "52:54:00:ab:cd:ef"),
    ("52-54-00-ab-cd-ef", "52:54:00:ab:cd:ef"),
    ("525400abcdef", "52:54:00:ab:cd:ef"),
    ("5254.00ab.cdef", "52:54:00:ab:cd:ef"),
])
def test_accepted_spellings_normalise_to_lower_colon_form(raw, expected):
    assert normalize_mac(raw) == expected
    assert is_canonical(expected)


@pytest.mark.parametrize("raw", [
    "../x", "../../etc/passwd", "52:54:00:12:34:56\n", "52:54:00:12:34:56\nfoo",
    " 52:54:00:12:34:56", "52:54:00:12:34", "52:54:00:12:34:56:78", "a:b:c:d:e:f",
    "52-54-00-12-34-5-6", "52:54:00:12:34:5g", "", "52:54:00:12:34:56/..",
    "*:*:*:*:*:*", "0x525400123456", None, 525400123456, ["52:54:00:12:34:56"],
    b"52:54:00:12:34:56",
])
def test_invalid_values_are_rejected(raw):
    with pytest.raises(InvalidMAC) as info:
        normalize_mac(raw)
    assert "invalid MAC address" in str(info.value)


def test_error_message_is_bounded_for_huge_input():
    with pytest.raises(InvalidMAC) as info:
        normalize_mac("x" * 10_000)
    assert len(str(info.value)) < 200


def test_split_valid_keeps_valid_entries_and_reports_the_rest():
    valid, rejected = split_valid(["52:54:00:12:34:56", "../x", "52-54-00-AB-CD-EF", 7])
    assert valid == ["52:54:00:12:34:56", "52:54:00:ab:cd:ef"]
    assert rejected == ["../x", 7]


def test_split_valid_rejects_a_non_list_whole():
    assert split_valid("52:54:00:12:34:56") == ([], ["52:54:00:12:34:56"])
    assert split_valid(None) == ([], [])
