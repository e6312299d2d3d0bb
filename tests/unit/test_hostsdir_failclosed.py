"""The hostsdir writer fails closed and never leaves its directory (issue 11, findings 2-3).

dnsmasq itself is the oracle in tests/resilience/; these pin the writer's decisions.
"""

import ctypes
import json
import os
import threading

import pytest

from pxe_filter.dnsmasq.control import RELOADED, Control
from pxe_filter.failsafe import FailSafe
from pxe_filter.foreign_files import remove_foreign
from pxe_filter.hostsdir import RESERVE, WILDCARD, HostsDir
from pxe_filter.policy import DesiredState
from pxe_filter.status.recorder import STATE_NAME, StatusRecorder
from pxe_filter.sync import FilterSync
from tests.support import services
from tests.support.files import chattr
from tests.support.memory_source import MemorySource

M1, M2, M3 = "52:54:00:00:11:01", "52:54:00:00:11:02", "52:54:00:00:11:03"
ALLOW_ALL, DENY_ALL = "*:*:*:*:*:*\n", "*:*:*:*:*:*,ignore\n"
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _sync(hd: HostsDir, desired: DesiredState):
    hd.scan()
    return hd.write_all(hd.changes(desired), full=True)


def _read(path, name):
    return (path / name).read_text()


def exchange(a, b) -> None:
    """Swap two paths atomically (renameat2 RENAME_EXCHANGE), as an attacker would."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b),
                      RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        services.unavailable("renameat2(RENAME_EXCHANGE)", os.strerror(err))




@pytest.fixture
def hd(tmp_path):
    hostsdir = HostsDir(str(tmp_path))
    yield hostsdir
    hostsdir.close()


def test_squatted_denial_flips_the_wildcard_with_the_reserve_and_recovers(tmp_path, hd):
    served = DesiredState(allow={M1}, deny={M2}, unknown_allowed=True)
    _sync(hd, served)
    assert hd.ensure_reserve()
    reserve_inode = os.lstat(tmp_path / RESERVE).st_ino
    os.mkdir(tmp_path / M3)  # squats the name of a MAC about to be denied
    report = _sync(hd, DesiredState(allow={M1}, deny={M2, M3}, unknown_allowed=True))
    assert report.failed == 1 and report.held == 0
    # The reserve was renamed over the wildcard: no new block was needed.
    assert _read(tmp_path, WILDCARD) == DENY_ALL
    assert os.lstat(tmp_path / WILDCARD).st_ino == reserve_inode
    assert hd.closed == {M3: "Is a directory"} and not hd.unenforced
    # Retried at every sync; the wildcard stays denied meanwhile.
    report = _sync(hd, DesiredState(allow={M1}, deny={M2, M3}, unknown_allowed=True))
    assert report.failed == 1 and report.held == 1
    assert _read(tmp_path, WILDCARD) == DENY_ALL
    os.rmdir(tmp_path / M3)
    assert hd.ensure_reserve()
    report = _sync(hd, DesiredState(allow={M1}, deny={M2, M3}, unknown_allowed=True))
    assert report.failed == 0 and not hd.failing
    assert _read(tmp_path, M3) == f"{M3},ignore\n"
    assert _read(tmp_path, WILDCARD) == ALLOW_ALL
    assert _read(tmp_path, RESERVE) == DENY_ALL


def test_denial_that_cannot_be_replaced_is_written_in_place(tmp_path, hd, monkeypatch):
    _sync(hd, DesiredState(allow={M1}, unknown_allowed=True))
    inode = os.lstat(tmp_path / M1).st_ino
    real_open = os.open

    def full_disk(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise OSError(28, "No space left on device")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", full_disk)
    report = _sync(hd, DesiredState(deny={M1}, unknown_allowed=True))
    monkeypatch.undo()
    assert report.written == 1 and report.failed == 0 and not hd.failing
    assert _read(tmp_path, M1) == f"{M1},ignore\n"
    assert os.lstat(tmp_path / M1).st_ino == inode  # the same file, overwritten
    assert _read(tmp_path, WILDCARD) == ALLOW_ALL  # nothing else had to close


def test_immutable_allow_file_is_unenforced(tmp_path, hd):
    _sync(hd, DesiredState(allow={M1}, unknown_allowed=True))
    chattr("+i", tmp_path / M1)
    try:
        _sync(hd, DesiredState(deny={M1}, unknown_allowed=True))
        assert set(hd.unenforced) == {M1}  # its own allow beats any wildcard
        assert _read(tmp_path, WILDCARD) == DENY_ALL
    finally:
        chattr("-i", tmp_path / M1)
    _sync(hd, DesiredState(deny={M1}, unknown_allowed=True))
    assert not hd.failing and _read(tmp_path, WILDCARD) == ALLOW_ALL


def test_a_swapped_directory_is_detected_and_never_written_through(tmp_path):
    hostsdir, elsewhere = tmp_path / "hostsdir", tmp_path / "elsewhere"
    hostsdir.mkdir()
    elsewhere.mkdir()
    hd = HostsDir(str(hostsdir))
    _sync(hd, DesiredState(allow={M1}))
    link = tmp_path / "link"
    os.symlink(elsewhere, link)
    exchange(hostsdir, link)  # hostsdir is now the symlink; the held one is at "link"
    assert hd.swapped() == "a symbolic link"
    report = _sync(hd, DesiredState(allow={M1}, deny={M2}))
    assert report.written == 1
    assert os.listdir(elsewhere) == []
    assert _read(link, M2) == f"{M2},ignore\n"  # the directory held, wherever it is now
    status = StatusRecorder(str(hostsdir / STATE_NAME), str(hostsdir), lambda: (1, 1, False),
                            lambda: {}, dir_fd=lambda: hd.dir_fd)
    status.write()
    assert os.listdir(elsewhere) == []
    assert json.loads(_read(link, STATE_NAME))["hostsdir"] == str(hostsdir)
    hd.close()


def test_a_state_file_that_cannot_be_replaced_is_overwritten_in_place_padded(tmp_path):
    path = tmp_path / "state.json"
    status = StatusRecorder(str(path), str(tmp_path / "a-long-hostsdir-path"),
                            lambda: (1, 1, False), lambda: {})
    status.write()
    before = os.stat(path)
    os.mkdir(f"{path}.{os.getpid()}.tmp")  # as a full disk: no new file can be made
    status.data["hostsdir"] = "/h"  # shorter: padded to the old size, never truncated
    status.write()
    assert os.stat(path).st_ino == before.st_ino and os.stat(path).st_size == before.st_size
    assert json.loads(path.read_text())["hostsdir"] == "/h"


def test_a_symlink_squatting_a_mac_name_is_never_written_through(tmp_path, hd):
    target = tmp_path.parent / f"{tmp_path.name}-target"
    target.write_text("precious\n")
    os.symlink(target, tmp_path / M1)
    assert hd.read_state(M1) == (os.lstat(tmp_path / M1).st_ino, None)
    hd._deny_in_place(M1)  # the fallback must not follow it either
    _sync(hd, DesiredState(deny={M1}))
    assert target.read_text() == "precious\n"
    assert _read(tmp_path, M1) == f"{M1},ignore\n"


def test_failed_files_are_retried_without_a_database_read(tmp_path):
    source = MemorySource({1: ("inspect wait", "agent"), 2: ("active", "agent")},
                          [(M1, 1), (M2, 2)])
    sync = FilterSync(source, str(tmp_path))
    os.mkdir(tmp_path / M2)
    result = sync.full_sync()
    assert result.failed == 1 and sync.hostsdir.failing
    assert _read(tmp_path, WILDCARD) == DENY_ALL  # held: M2's denial is not on disk
    assert "held until every denial is written" in result.summary()
    os.rmdir(tmp_path / M2)
    written = sync.converge(failing_only=True)
    assert written == [M2, WILDCARD] and not sync.hostsdir.failing
    assert _read(tmp_path, M2) == f"{M2},ignore\n"
    assert _read(tmp_path, WILDCARD) == ALLOW_ALL
    assert sync.converge(failing_only=True) is None  # nothing failing: nothing done
    sync.hostsdir.close()


class RecordingControl(Control):
    name = "recording"
    can_reload = True

    def __init__(self) -> None:
        self.calls: list[str] = []

    def reload(self) -> str:
        self.calls.append("reload")
        return RELOADED

    def halt(self) -> None:
        self.calls.append("halt")

    def start(self) -> None:
        self.calls.append("start")


def _failsafe(tmp_path, hd, control):
    status = StatusRecorder(str(tmp_path / "state.json"), str(tmp_path),
                            lambda: (0, 0, True), control.describe)
    reloads: list[str] = []

    def reload_dnsmasq(reason: str) -> bool:
        reloads.append(reason)
        return True

    safe = FailSafe(hd, control, status, reload_dnsmasq=reload_dnsmasq, wake=lambda: None)
    safe.started = True
    return safe, status, reloads


def test_failsafe_stops_dnsmasq_until_every_denial_is_written(tmp_path, hd):
    control = RecordingControl()
    safe, status, _ = _failsafe(tmp_path, hd, control)
    _sync(hd, DesiredState(allow={M1}, unknown_allowed=True))
    chattr("+i", tmp_path / M1)
    try:
        safe.after_writes(_sync(hd, DesiredState(deny={M1}, unknown_allowed=True)), True)
        assert control.calls == ["halt"] and safe.halted
        assert status.data["fail_closed"] and "dnsmasq stopped" in status.data["fail_closed_reason"]
        state = json.loads((tmp_path / "state.json").read_text())
        assert state["fail_closed"] is True and M1 in state["fail_closed_reason"]
        safe.after_writes(_sync(hd, DesiredState(deny={M1}, unknown_allowed=True)), True)
        assert control.calls == ["halt"]  # once
    finally:
        chattr("-i", tmp_path / M1)
    # A sync from another thread may not start a supervised dnsmasq: the main one does.
    worker = threading.Thread(target=lambda: safe.after_writes(
        _sync(hd, DesiredState(deny={M1}, unknown_allowed=True)), True))
    worker.start()
    worker.join()
    assert control.calls == ["halt"] and safe.halted
    safe.after_writes(_sync(hd, DesiredState(deny={M1}, unknown_allowed=True)), True)
    assert control.calls == ["halt", "start"] and safe.halted is None
    assert not status.data["fail_closed"] and status.data["fail_closed_reason"] is None


def test_failsafe_reloads_when_a_deleted_allow_may_linger(tmp_path, hd):
    safe, status, reloads = _failsafe(tmp_path, hd, RecordingControl())
    _sync(hd, DesiredState(allow={M1}, unknown_allowed=True))
    os.mkdir(tmp_path / "squat")  # made first: it cannot reuse M1's inode number
    os.unlink(tmp_path / M1)
    os.rename(tmp_path / "squat", tmp_path / M1)  # dnsmasq still serves M1 until SIGHUP
    report = _sync(hd, DesiredState(deny={M1}, unknown_allowed=True))
    assert report.reload_needed
    safe.after_writes(report, True)
    assert len(reloads) == 1 and not hd.vanished
    assert status.data["fail_closed"] and "unknown MACs denied" in status.data["fail_closed_reason"]


def test_failsafe_without_control_asks_the_daemon_to_exit(tmp_path, hd):
    safe, status, _ = _failsafe(tmp_path, hd, Control())
    _sync(hd, DesiredState(allow={M1}, unknown_allowed=True))
    chattr("+i", tmp_path / M1)
    try:
        safe.after_writes(_sync(hd, DesiredState(deny={M1}, unknown_allowed=True)), True)
    finally:
        chattr("-i", tmp_path / M1)
    assert safe.fatal and "BindsTo" in safe.fatal
    assert status.data["fail_closed_reason"].startswith("exiting: ")


def test_failsafe_reloads_after_a_foreign_file_is_removed(tmp_path, hd):
    safe, _, reloads = _failsafe(tmp_path, hd, RecordingControl())
    (tmp_path / "zz-all").write_text("*:*:*:*:*:*\n")
    hd.scan()
    safe.after_foreign(remove_foreign(hd))
    assert len(reloads) == 1 and "zz-all" in reloads[0]
    safe.after_foreign(remove_foreign(hd))  # nothing new: no second reload
    assert len(reloads) == 1


def test_failsafe_stops_dnsmasq_while_a_foreign_file_stays(tmp_path, hd):
    control = RecordingControl()
    safe, status, _ = _failsafe(tmp_path, hd, control)
    (tmp_path / "zz-extra").write_text(f"{M1}\n")
    hd.scan()
    chattr("+i", tmp_path / "zz-extra")
    try:
        safe.after_foreign(remove_foreign(hd))
        assert control.calls == ["halt"] and "zz-extra" in status.data["fail_closed_reason"]
        safe.after_writes(_sync(hd, DesiredState(deny={M1})), True)
        assert control.calls == ["halt"]  # still there: dnsmasq stays stopped
    finally:
        chattr("-i", tmp_path / "zz-extra")
    safe.after_foreign(remove_foreign(hd))
    safe.after_writes(_sync(hd, DesiredState(deny={M1})), True)
    assert control.calls == ["halt", "start"] and not status.data["fail_closed"]


def test_failsafe_without_control_exits_after_a_foreign_file_is_removed(tmp_path, hd):
    safe, _, _ = _failsafe(tmp_path, hd, Control())
    (tmp_path / "zz-all").write_text("*:*:*:*:*:*\n")
    hd.scan()
    safe.after_foreign(remove_foreign(hd))
    assert safe.fatal and "no [dnsmasq]control can reload it" in safe.fatal


def test_failsafe_reloads_after_rewriting_foreign_content(tmp_path, hd):
    safe, _, reloads = _failsafe(tmp_path, hd, RecordingControl())
    (tmp_path / M2).write_text(f"{M1}\n")  # another MAC's line: dnsmasq keeps it until SIGHUP
    report = _sync(hd, DesiredState(deny={M1, M2}))
    assert report.foreign_content == M2 and (tmp_path / M2).read_text() == f"{M2},ignore\n"
    safe.after_writes(report, True)
    assert reloads == [f"foreign content in {tmp_path / M2}"]
    safe.after_writes(_sync(hd, DesiredState(deny={M1, M2})), True)  # the filter's own now
    assert len(reloads) == 1


def test_failsafe_without_control_exits_after_rewriting_foreign_content(tmp_path, hd):
    safe, _, _ = _failsafe(tmp_path, hd, Control())
    (tmp_path / M2).write_text(f"{M1}\n")
    safe.after_writes(_sync(hd, DesiredState(deny={M1, M2})), True)
    assert safe.fatal and "foreign content in" in safe.fatal
    assert "no [dnsmasq]control can reload it" in safe.fatal


def test_an_emptied_mac_file_needs_no_reload(tmp_path, hd):
    safe, _, reloads = _failsafe(tmp_path, hd, RecordingControl())
    _sync(hd, DesiredState(allow={M1}))
    (tmp_path / "new").write_text("")
    (tmp_path / "new").rename(tmp_path / M1)  # emptied: no line dnsmasq could keep
    report = _sync(hd, DesiredState(allow={M1}))
    assert report.written == 1 and report.foreign_content is None
    safe.after_writes(report, True)
    assert not reloads and safe.fatal is None
