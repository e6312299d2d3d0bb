"""Creating the state directories a command needs."""

import os
import stat

import pytest
from sqlalchemy.engine import make_url

from pxe_filter.common.config import ConfigError
from pxe_filter.common.statedirs import check_sqlite_file, ensure_dir


def test_missing_directories_are_created_with_the_mode(tmp_path):
    path = tmp_path / "a" / "b"
    assert ensure_dir(str(path), 0o750) is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o750
    assert ensure_dir(str(path), 0o750) is False


def test_a_file_in_the_way_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "leases"
    path.write_text("")
    with pytest.raises(ConfigError, match="exists but is not a directory: remove or rename"):
        ensure_dir(str(path), what="lease report directory")


def test_a_missing_sqlite_file_is_refused_unless_created(tmp_path):
    url = make_url(f"sqlite:///{tmp_path}/state/db.sqlite")
    with pytest.raises(ConfigError, match="does not exist: create it with 'ironic-inspection "
                                          "dbsync'"):
        check_sqlite_file(url)
    assert not (tmp_path / "state").exists()
    check_sqlite_file(url, create=True)  # dbsync: its directory, mode 0750
    assert stat.S_IMODE(os.stat(tmp_path / "state").st_mode) == 0o750
    check_sqlite_file(make_url("sqlite://"))  # in memory: nothing to check
