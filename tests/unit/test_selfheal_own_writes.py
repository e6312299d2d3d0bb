"""The self-heal watcher drops the events of our own writes, in place or renamed, and no
foreign event (real inotify on a temporary directory)."""

import os

from pxe_filter.hostsdir import HostsDir
from pxe_filter.policy import DesiredState
from pxe_filter.selfheal.watcher import HostsdirWatcher

M1, M2, M3 = "52:54:00:00:21:01", "52:54:00:00:21:02", "52:54:00:00:21:03"


def _watched(tmp_path) -> tuple[HostsDir, HostsdirWatcher, list[tuple[set[str], set[str]]]]:
    calls: list[tuple[set[str], set[str]]] = []

    def repair(names: set[str], content: set[str]) -> list[str]:
        calls.append((set(names), set(content)))
        return []

    hd = HostsDir(str(tmp_path))
    watcher = HostsdirWatcher(str(tmp_path), repair, lambda: None, lambda why: None)
    hd.observer = watcher
    return hd, watcher, calls


def test_files_created_in_place_make_no_repair(tmp_path):
    hd, watcher, calls = _watched(tmp_path)
    try:
        hd.scan()
        hd.write_all(hd.changes(DesiredState(allow={M1}, deny={M2, M3})))
        watcher._handle()
        assert calls == []  # create, write and close of each file were ours
        hd.write_all(hd.changes(DesiredState(allow={M2}, deny={M1, M3})))  # renames now
        watcher._handle()
        assert calls == [] and watcher._expected == {}
    finally:
        watcher.stop()


def test_a_foreign_edit_after_an_in_place_create_still_reaches_repair(tmp_path):
    hd, watcher, calls = _watched(tmp_path)
    try:
        hd.scan()
        hd.write_all(hd.changes(DesiredState(deny={M1, M2})))
        with open(tmp_path / M1, "w") as edit:  # in place, same inode
            edit.write(f"{M1}\n")
        watcher._handle()
        assert calls == [({M1}, {M1})]
    finally:
        watcher.stop()


def test_a_failed_in_place_create_hides_no_later_event(tmp_path, monkeypatch):
    hd, watcher, calls = _watched(tmp_path)
    real_write = os.write

    def full_disk(fd, data):
        if data.startswith(M1.encode()):
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    try:
        hd.scan()
        monkeypatch.setattr(os, "write", full_disk)
        hd.write_all(hd.changes(DesiredState(allow={M1})))
        monkeypatch.undo()
        assert M1 not in watcher._expected  # nothing left to swallow a foreign event
        (tmp_path / M1).write_text(f"{M1},ignore\n")
        watcher._handle()
        assert calls and M1 in calls[-1][0]
    finally:
        watcher.stop()
