"""SelfHealer in process: repairs, overflow and hostsdir restoration against a memory source."""

import shutil

import pytest

from pxe_filter.common.lifecycle import ServiceError
from pxe_filter.dnsmasq.control import RELOADED, Control
from pxe_filter.selfheal.healer import SelfHealer
from pxe_filter.status.recorder import StatusRecorder
from pxe_filter.sync import FilterSync
from tests.support.memory_source import MemorySource

ALLOWED, DENIED = "52:54:00:00:77:01", "52:54:00:00:77:02"


class RecordingControl(Control):
    """A dnsmasq control that records what the healer asked of it (dnsmasq itself is
    exercised by the daemon's integration tests)."""

    name = "recording"
    can_reload = True

    def __init__(self) -> None:
        self.calls: list[str] = []

    def reload(self) -> str:
        self.calls.append("reload")
        return RELOADED

    def restart(self) -> None:
        self.calls.append("restart")


@pytest.fixture
def parts(tmp_path):
    hostsdir = tmp_path / "hosts"
    hostsdir.mkdir()
    source = MemorySource({1: ("inspect wait", "agent"), 2: ("active", "agent")},
                          [(ALLOWED, 1), (DENIED, 2)])
    sync = FilterSync(source, str(hostsdir))
    sync.full_sync()
    control = RecordingControl()
    status = StatusRecorder(str(tmp_path / "status.json"), str(hostsdir), sync.figures,
                            control.describe)
    sync.hostsdir.lock()
    reloads: list[str] = []
    wakes: list[int] = []

    def reload_dnsmasq(reason: str) -> bool:
        reloads.append(reason)
        return True

    healer = SelfHealer(str(hostsdir), sync, control, status,
                        reload_dnsmasq=reload_dnsmasq, threshold=1,
                        wake=lambda: wakes.append(1))
    yield healer, hostsdir, control, status, reloads, wakes
    sync.hostsdir.unlock()


def test_repair_puts_a_foreign_edit_back_and_records_it(parts):
    healer, hostsdir, _, status, reloads, _ = parts
    (hostsdir / DENIED).write_text(f"{DENIED}\n")  # someone opened a denied MAC
    assert healer.repair({DENIED}, {DENIED}) == [DENIED]
    assert (hostsdir / DENIED).read_text() == f"{DENIED},ignore\n"
    assert status.data["repaired"] == 1 and reloads == []


def test_repairs_beyond_the_threshold_reload_dnsmasq(parts):
    healer, hostsdir, _, _, reloads, _ = parts
    (hostsdir / DENIED).unlink()
    (hostsdir / ALLOWED).write_text(f"{ALLOWED},ignore\n")
    assert sorted(healer.repair({DENIED, ALLOWED}, {ALLOWED})) == \
        sorted([DENIED, ALLOWED])
    assert reloads == ["2 files were repaired"]


def test_a_deny_renamed_to_another_spelling_is_back_before_dnsmasq_forgets_it(parts):
    healer, hostsdir, _, _, _, _ = parts
    seen = []
    # The foreign-file reload makes dnsmasq forget the renamed deny: by then it is back.
    healer.sync.after_foreign = lambda report: seen.append(
        (report.removed, (hostsdir / DENIED).read_text()))
    dashes = DENIED.replace(":", "-")
    (hostsdir / DENIED).rename(hostsdir / dashes)
    assert healer.repair({DENIED, dashes}, set()) == [DENIED]
    assert seen == [([dashes], f"{DENIED},ignore\n")]
    assert not (hostsdir / dashes).exists()


def test_overflow_rechecks_everything_and_reloads(parts):
    healer, hostsdir, _, _, reloads, _ = parts
    (hostsdir / ALLOWED).write_text(f"{ALLOWED},ignore\n")
    healer.on_overflow()
    assert (hostsdir / ALLOWED).read_text() == f"{ALLOWED}\n"
    assert reloads == ["an inotify queue overflow"]


def test_unchanged_hostsdir_needs_nothing(parts):
    healer, _, control, _, _, _ = parts
    assert healer.check_hostsdir() is False and not healer.lost and control.calls == []


def test_removed_hostsdir_is_restored_and_dnsmasq_restarted(parts):
    healer, hostsdir, control, status, _, wakes = parts
    shutil.rmtree(hostsdir)
    healer.on_lost("deleted")
    assert healer.lost and wakes == [1]
    assert healer.check_hostsdir() is True
    assert (hostsdir / ALLOWED).read_text() == f"{ALLOWED}\n"
    assert (hostsdir / DENIED).read_text() == f"{DENIED},ignore\n"
    assert (hostsdir / "unknown_hosts_filter").read_text() == "*:*:*:*:*:*\n"
    assert control.calls == ["restart"] and not healer.lost
    assert status.data["dnsmasq_events"]["restarts"] == 1


def test_a_late_event_of_the_removed_hostsdir_does_not_trip_our_own_lock(parts):
    healer, hostsdir, control, _, _, _ = parts
    shutil.rmtree(hostsdir)
    healer.on_lost("deleted")
    assert healer.check_hostsdir() is True
    healer.on_lost("watch removed")  # the old watch's IGNORED, read after the restore
    assert healer.check_hostsdir() is True  # watched again; not restored a second time
    assert not healer.lost
    assert (hostsdir / DENIED).read_text() == f"{DENIED},ignore\n"
    assert control.calls == ["restart"]


def test_restoring_without_a_control_is_fatal_after_writing_the_files(parts):
    healer, hostsdir, _, _, _, _ = parts
    healer.control = Control()
    shutil.rmtree(hostsdir)
    with pytest.raises(ServiceError, match="no \\[dnsmasq\\]control"):
        healer.check_hostsdir()
    assert (hostsdir / DENIED).read_text() == f"{DENIED},ignore\n"
