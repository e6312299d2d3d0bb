"""The lease book: each MAC's last DHCP, saved where the daemon holds its hostsdir."""

import json
import os

from pxe_filter import leases

MAC = "52:54:00:ab:00:01"


def test_the_book_is_saved_into_the_held_directory_not_a_swapped_path(tmp_path):
    held = tmp_path / "hosts"
    held.mkdir()
    fd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    try:
        path = leases.book_path(str(held / ".ironic-pxe-filter.status.json"))
        book = leases.LeaseBook(path, dir_fd=lambda: fd)
        held.rename(tmp_path / "moved")
        (tmp_path / "hosts").mkdir()  # someone else's directory now at the path
        book.record(leases.Lease(1700000000.0, "add", MAC, "192.0.2.10"))
        book.save()
    finally:
        os.close(fd)
    assert os.listdir(tmp_path / "hosts") == []
    saved = json.loads((tmp_path / "moved" / os.path.basename(path)).read_text())
    assert saved == {MAC: {"time": 1700000000.0, "address": "192.0.2.10"}}
    assert leases.load(str(tmp_path / "moved" / os.path.basename(path)))[MAC]["address"] \
        == "192.0.2.10"


def test_a_book_outside_the_hostsdir_is_saved_by_path(tmp_path):
    path = str(tmp_path / "ironic-pxe-filter.leases.json")
    book = leases.LeaseBook(path)
    book.record(leases.Lease(1700000000.0, "old", MAC, "192.0.2.11"))
    book.save()
    assert leases.load(path) == {MAC: {"time": 1700000000.0, "address": "192.0.2.11"}}
    assert sorted(os.listdir(tmp_path)) == ["ironic-pxe-filter.leases.json"]


def test_a_failed_save_is_logged_once_and_retried(tmp_path, caplog):
    path = str(tmp_path / "ironic-pxe-filter.leases.json")
    book = leases.LeaseBook(path)
    os.mkdir(f"{path}.{os.getpid()}.tmp")  # the temporary file cannot be made
    book.record(leases.Lease(1700000000.0, "add", MAC, "192.0.2.12"))
    book.save()
    book.save()
    assert caplog.text.count("Cannot save the last DHCP of each MAC") == 1
    assert leases.load(path) == {}
    os.rmdir(f"{path}.{os.getpid()}.tmp")
    book.save()
    assert leases.load(path) == {MAC: {"time": 1700000000.0, "address": "192.0.2.12"}}
