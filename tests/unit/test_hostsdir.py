"""The hostsdir writer against a real directory: atomic, content-based, never deleting."""

import os
import stat

import pytest

from pxe_filter.foreign_files import remove_foreign
from pxe_filter.hostsdir import WILDCARD, HostsDir
from pxe_filter.policy import DesiredState
from tests.support.files import chattr

M1, M2, M3 = "52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:03"
ALLOW, DENY = "{}\n", "{},ignore\n"


def _sync(hd: HostsDir, desired: DesiredState):
    hd.scan()
    return hd.write_all(hd.changes(desired))


def _read(path, name):
    return (path / name).read_text()


@pytest.fixture
def hd(tmp_path):
    return HostsDir(str(tmp_path))


def test_writes_canonical_lines_and_wildcard(tmp_path, hd):
    report = _sync(hd, DesiredState(allow={M1}, deny={M2}, unknown_allowed=False))
    assert report.written == 3 and report.failed == 0
    assert _read(tmp_path, M1) == ALLOW.format(M1)
    assert _read(tmp_path, M2) == DENY.format(M2)
    assert _read(tmp_path, WILDCARD) == "*:*:*:*:*:*,ignore\n"
    assert sorted(os.listdir(tmp_path)) == sorted([M1, M2, WILDCARD])  # no temp file left


def test_second_sync_writes_nothing_and_reads_nothing(tmp_path, hd):
    desired = DesiredState(allow={M1}, deny={M2})
    _sync(hd, desired)
    report = _sync(hd, desired)
    assert report.written == 0 and hd.reread == 0


def test_rewrite_replaces_the_file_atomically(tmp_path, hd):
    _sync(hd, DesiredState(allow={M1}))
    before = os.stat(tmp_path / M1).st_ino
    _sync(hd, DesiredState(deny={M1}))
    # A new inode means rename() replaced the file: dnsmasq never saw it truncated.
    assert os.stat(tmp_path / M1).st_ino != before
    assert _read(tmp_path, M1) == DENY.format(M1)


def test_files_are_0644_whatever_the_umask(tmp_path, hd):
    old = os.umask(0o077)
    try:
        _sync(hd, DesiredState(allow={M1}, deny={M2}))
    finally:
        os.umask(old)
    for name in (M1, M2, WILDCARD):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o644


def test_a_leftover_dotfile_does_not_pass_on_its_mode(tmp_path, hd):
    # O_TRUNC keeps an existing file's mode: a dotfile left by a crash must not decide it
    leftover = tmp_path / f".{M1}.tmp"
    leftover.write_text("half")
    leftover.chmod(0o600)
    _sync(hd, DesiredState(allow={M1}))
    assert stat.S_IMODE(os.stat(tmp_path / M1).st_mode) == 0o644
    assert _read(tmp_path, M1) == f"{M1}\n"


def _record_creates(monkeypatch) -> list[str]:
    """Names opened with O_CREAT, in order (the dotfiles of renames included)."""
    created: list[str] = []
    real_open = os.open

    def recording(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            created.append(path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording)
    return created


def test_new_files_are_created_in_place_existing_ones_renamed(tmp_path, hd, monkeypatch):
    created = _record_creates(monkeypatch)
    _sync(hd, DesiredState(allow={M1}, deny={M2}))
    # A new MAC file is created under its own name (one directory operation); the
    # wildcard keeps the dotfile and the rename.
    assert created == [M2, f".{WILDCARD}.tmp", M1]
    assert sorted(os.listdir(tmp_path)) == sorted([M1, M2, WILDCARD])
    created.clear()
    _sync(hd, DesiredState(allow={M2}, deny={M1}))
    assert created == [f".{M1}.tmp", f".{M2}.tmp"]  # existing files: replaced by a rename
    assert _read(tmp_path, M1) == DENY.format(M1) and _read(tmp_path, M2) == ALLOW.format(M2)


def test_in_place_creation_keeps_deny_first_and_the_mode_whatever_the_umask(
        tmp_path, hd, monkeypatch):
    allow = {f"52:54:00:00:01:{i:02x}" for i in range(20)}
    deny = {f"52:54:00:00:02:{i:02x}" for i in range(20)}
    created = _record_creates(monkeypatch)
    old = os.umask(0o077)
    try:
        report = _sync(hd, DesiredState(allow=allow, deny=deny, unknown_allowed=True))
    finally:
        os.umask(old)
    assert report.written == 41 and report.failed == 0
    macs = [name for name in created if not name.startswith(".")]
    assert set(macs[:20]) == deny and set(macs[20:]) == allow  # every deny before any allow
    for name in (*allow, *deny, WILDCARD):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o644
    for name in allow:
        assert _read(tmp_path, name) == ALLOW.format(name)
    for name in deny:
        assert _read(tmp_path, name) == DENY.format(name)


def test_in_place_creation_gives_the_same_files_as_renames(tmp_path, monkeypatch):
    allow = {f"52:54:00:00:01:{i:02x}" for i in range(10)}
    deny = {f"52:54:00:00:02:{i:02x}" for i in range(10)}
    results = []
    for mode, where in (("create", tmp_path / "a"), ("rename", tmp_path / "b")):
        where.mkdir()
        hd = HostsDir(str(where))
        if mode == "rename":
            monkeypatch.setattr(HostsDir, "_create", lambda self, name, data: None)
        _sync(hd, DesiredState(allow=allow, deny=deny))
        results.append({entry.name: (entry.stat().st_mode, (where / entry.name).read_bytes())
                        for entry in os.scandir(where)})
    assert results[0] == results[1]


def test_a_file_made_since_the_scan_is_replaced_not_reused(tmp_path, hd):
    hd.scan()
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    os.symlink(target, tmp_path / M1)  # made after the scan: O_EXCL refuses it
    (tmp_path / M2).write_text(f"{M2}\n")
    (tmp_path / M2).chmod(0o600)
    report = hd.write_all(hd.changes(DesiredState(deny={M1, M2})))
    assert report.written == 3 and report.failed == 0
    assert not os.path.islink(tmp_path / M1) and _read(tmp_path, M1) == DENY.format(M1)
    assert target.read_text() == "keep\n"
    assert _read(tmp_path, M2) == DENY.format(M2)
    assert stat.S_IMODE(os.stat(tmp_path / M2).st_mode) == 0o644


def test_a_failed_in_place_write_leaves_no_file_under_the_name(tmp_path, hd, monkeypatch):
    real_write = os.write

    def full_disk(fd, data):
        if data.startswith(M1.encode()):
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    report = _sync(hd, DesiredState(allow={M1}, deny={M2}))
    monkeypatch.undo()
    assert report.failed == 1 and M1 in hd.unserved
    assert not (tmp_path / M1).exists()  # neither an empty nor a partial file is left
    assert _read(tmp_path, M2) == DENY.format(M2)
    report = _sync(hd, DesiredState(allow={M1}, deny={M2}))
    assert report.written == 1 and _read(tmp_path, M1) == ALLOW.format(M1)


def test_first_scan_classifies_by_content_not_size(tmp_path, hd):
    # Right sizes (18 and 25 bytes), wrong content: another MAC, a bogus option.
    (tmp_path / M1).write_text(ALLOW.format(M2))
    (tmp_path / M2).write_text(f"{M2},ignorX\n")
    (tmp_path / M3).write_text(DENY.format(M3))  # already right: must not be rewritten
    ino3 = os.stat(tmp_path / M3).st_ino
    report = _sync(hd, DesiredState(allow={M1}, deny={M2, M3}))
    assert _read(tmp_path, M1) == ALLOW.format(M1)
    assert _read(tmp_path, M2) == DENY.format(M2)
    assert os.stat(tmp_path / M3).st_ino == ino3
    assert report.written == 3  # M1, M2 and the missing wildcard
    assert hd.reread == 3


def test_non_canonical_spellings_are_foreign_and_removed(tmp_path, hd):
    mac = "52:54:00:ab:cd:ef"
    spellings = ["52:54:00:AB:CD:EF", "52-54-00-ab-cd-ef", "525400abcdef", "5254.00ab.cdef"]
    for name in spellings:
        (tmp_path / name).write_text(f"{name}\n")  # dnsmasq would serve the MAC through these
    (tmp_path / "52-54-00-00-00-09").write_text("52-54-00-00-00-09,ignore\n")  # a deny too
    names = {*spellings, "52-54-00-00-00-09"}
    hd.scan()
    assert hd.foreign == names and not hd.managed_names()
    report = remove_foreign(hd)
    assert set(report.removed) == names
    assert report.reload_needed  # dnsmasq keeps what they said until SIGHUP
    # Only the canonical name is the MAC's file, written by the policy.
    hd.write_all(hd.changes(DesiredState(deny={mac}, unknown_allowed=True)))
    assert _read(tmp_path, mac) == DENY.format(mac)
    assert sorted(os.listdir(tmp_path)) == sorted([mac, WILDCARD])


def test_files_the_filter_did_not_write_are_removed_dotfiles_kept(tmp_path, hd):
    foreign = {"README": "hello\n", "hosts.conf": "52:54:00:00:00:01\n",
               "52:54:00:00:01": "short\n", "52:54:00:00:00:01~": "backup\n",
               "zz:zz:zz:zz:zz:zz": "z\n", "zz-all": "*:*:*:*:*:*\n",
               f"{M1}.bak": ALLOW.format(M1)}
    dotfiles = {".hidden": "x\n", ".other.tmp": "y\n"}
    for name, text in {**foreign, **dotfiles}.items():
        (tmp_path / name).write_text(text)
    os.mkdir(tmp_path / "subdir")  # dnsmasq reads no directory: left alone
    hd.scan()
    report = remove_foreign(hd)
    assert sorted(report.removed) == sorted(foreign)
    assert report.reload_needed and not report.failed
    assert set(os.listdir(tmp_path)) == {*dotfiles, "subdir"}
    hd.write_all(hd.changes(DesiredState(deny={M1})))
    assert not remove_foreign(hd).reload_needed  # nothing left, nothing to reload for


def test_foreign_file_that_cannot_be_deleted_nor_emptied_fails(tmp_path, hd):
    (tmp_path / "zz-all").write_text("*:*:*:*:*:*\n")
    chattr("+a", tmp_path / "zz-all")  # append-only: cannot be deleted nor emptied
    try:
        hd.scan()
        report = remove_foreign(hd)
        assert list(report.failed) == ["zz-all"] and hd.failing
    finally:
        chattr("-a", tmp_path / "zz-all")
    report = remove_foreign(hd)
    assert report.removed == ["zz-all"] and not hd.failing


def test_foreign_file_in_an_immutable_directory_is_emptied_once(tmp_path, hd):
    (tmp_path / "zz-all").write_text("*:*:*:*:*:*\n")
    hd.scan()
    chattr("+i", tmp_path)  # no entry can be removed; the file itself can be written
    try:
        report = remove_foreign(hd)
        assert report.neutralised == ["zz-all"] and report.reload_needed
        assert _read(tmp_path, "zz-all") == ""
        assert not remove_foreign(hd).reload_needed  # still empty: no second reload
        (tmp_path / "zz-all").write_text("*:*:*:*:*:*\n")
        assert remove_foreign(hd).neutralised == ["zz-all"]
    finally:
        chattr("-i", tmp_path)


def test_foreign_file_deleted_by_someone_else_still_needs_a_reload(tmp_path, hd):
    (tmp_path / "zz-extra").write_text(ALLOW.format(M2))
    hd.scan()
    os.unlink(tmp_path / "zz-extra")
    hd.scan()
    report = remove_foreign(hd)
    assert report.gone == ["zz-extra"] and report.reload_needed


def test_files_without_port_follow_the_unknown_policy_and_are_never_deleted(tmp_path, hd):
    (tmp_path / M3).write_text(ALLOW.format(M3))
    _sync(hd, DesiredState(allow={M1}, unknown_allowed=False))
    assert _read(tmp_path, M3) == DENY.format(M3)
    _sync(hd, DesiredState(unknown_allowed=True))  # M1's port is gone
    assert _read(tmp_path, M1) == ALLOW.format(M1)
    assert _read(tmp_path, M3) == ALLOW.format(M3)
    assert _read(tmp_path, WILDCARD) == "*:*:*:*:*:*\n"


def test_stale_own_temp_files_are_removed_others_kept(tmp_path, hd):
    ours = [f".{M1}.tmp", f".{WILDCARD}.tmp"]
    theirs = [".foo.tmp", ".AA:BB:CC:DD:EE:FF.tmp", ".ironic-pxe-filter.lock"]
    for name in ours + theirs:
        (tmp_path / name).write_text("partial")
    _sync(hd, DesiredState(deny={M1}))
    names = set(os.listdir(tmp_path))
    assert not names & set(ours)
    assert set(theirs) <= names


def test_detects_an_externally_replaced_file(tmp_path, hd):
    desired = DesiredState(allow={M1}, deny={M2})
    _sync(hd, desired)
    replacement = tmp_path / "incoming"
    replacement.write_text(ALLOW.format(M2))
    os.rename(replacement, tmp_path / M2)  # somebody else's atomic replace
    report = _sync(hd, desired)
    assert hd.reread == 1 and report.written == 1
    assert _read(tmp_path, M2) == DENY.format(M2)


def test_a_vanished_file_is_recreated_when_the_database_names_it(tmp_path, hd):
    (tmp_path / M3).write_text(DENY.format(M3))
    _sync(hd, DesiredState(allow={M1}))
    os.unlink(tmp_path / M1)
    os.unlink(tmp_path / M3)  # no port: nothing to recreate
    report = _sync(hd, DesiredState(allow={M1}))
    assert report.failed == 0
    assert _read(tmp_path, M1) == ALLOW.format(M1)
    assert not (tmp_path / M3).exists()


def test_symlink_named_as_mac_is_replaced_not_followed(tmp_path, hd):
    target = tmp_path.parent / f"{tmp_path.name}-outside"
    target.write_text("precious\n")
    os.symlink(target, tmp_path / M1)
    _sync(hd, DesiredState(deny={M1}))
    assert target.read_text() == "precious\n"
    assert not os.path.islink(tmp_path / M1)
    assert _read(tmp_path, M1) == DENY.format(M1)




def test_one_failing_file_fails_alone_and_is_retried(tmp_path, hd, caplog):
    (tmp_path / M2).write_text(ALLOW.format(M2))
    chattr("+i", tmp_path / M2)  # immutable: even root cannot replace it
    os.mkdir(tmp_path / M3)  # a directory squatting on a MAC's name
    try:
        desired = DesiredState(allow={M1}, deny={M2, M3})
        report = _sync(hd, desired)
        assert report.failed == 2 and report.written == 2  # M1 and the wildcard
        assert _read(tmp_path, M1) == ALLOW.format(M1)
        assert str(tmp_path / M2) in caplog.text and str(tmp_path / M3) in caplog.text
        assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
        report = _sync(hd, desired)
        assert report.failed == 2 and report.written == 0  # retried, still failing
    finally:
        chattr("-i", tmp_path / M2)
    os.rmdir(tmp_path / M3)
    report = _sync(hd, desired)
    assert report.failed == 0 and report.written == 2
    assert _read(tmp_path, M2) == DENY.format(M2)
    assert _read(tmp_path, M3) == DENY.format(M3)


def test_stop_request_interrupts_between_files(tmp_path, hd):
    desired = DesiredState(deny={f"52:54:00:00:01:{i:02x}" for i in range(50)})
    hd.scan()
    calls = []

    def should_stop():
        calls.append(1)
        return len(calls) > 10

    report = hd.write_all(hd.changes(desired), should_stop)
    assert report.interrupted and report.written == 10
    files = os.listdir(tmp_path)
    assert len(files) == 10 and not [n for n in files if n.startswith(".")]
    for name in files:
        assert _read(tmp_path, name) == DENY.format(name)


def test_invalidate_rereads_in_place_edits(tmp_path, hd):
    desired = DesiredState(allow={M1})
    _sync(hd, desired)
    with open(tmp_path / M1, "r+") as f:  # same inode: invisible to a normal scan
        f.write(DENY.format(M1))
    hd.invalidate()
    report = _sync(hd, desired)
    assert report.written == 1 and _read(tmp_path, M1) == ALLOW.format(M1)


def test_listing_taken_without_the_lock_survives_writes_made_meanwhile(tmp_path, hd):
    _sync(hd, DesiredState(allow={M1}, deny={M2}))
    listing = hd.list_entries()
    # Writes between the listing and the scan (a broadcast): one rewrite, one new file.
    hd.write(M1, False)
    hd.write(M3, True)
    (tmp_path / "52:54:00:00:00:04").write_text("52:54:00:00:00:04\n")  # someone else's
    hd.scan(listing)
    assert hd.state_of(M1) is False and hd.state_of(M3) is True
    assert hd.state_of("52:54:00:00:00:04") is None  # not in the listing: next scan
    hd.scan()
    assert hd.state_of("52:54:00:00:00:04") is True and hd.reread == 1
    os.unlink(tmp_path / M2)  # a removal makes the quick listing fall back to a full one
    hd.scan(hd.list_entries())
    assert hd.state_of(M2) is None
    assert (M2, False) in hd.changes(DesiredState(allow={M1}, deny={M2}))
