"""The hostsdir writer never leaves its directory (issue 11, finding 3).

dnsmasq itself is the oracle in tests/resilience/; these pin the writer's decisions.
"""

import ctypes
import json
import os

import pytest

from pxe_filter.hostsdir import HostsDir
from pxe_filter.policy import DesiredState
from pxe_filter.state import STATE_NAME, StatusRecorder

M1, M2, M3 = "52:54:00:00:11:01", "52:54:00:00:11:02", "52:54:00:00:11:03"
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def _sync(hd: HostsDir, desired: DesiredState):
    hd.scan()
    return hd.write_all(hd.changes(desired))


def _read(path, name):
    return (path / name).read_text()


def exchange(a, b) -> None:
    """Swap two paths atomically (renameat2 RENAME_EXCHANGE), as an attacker would."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b),
                      RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        pytest.skip(f"renameat2(RENAME_EXCHANGE) unsupported: {os.strerror(err)}")


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
