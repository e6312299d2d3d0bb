"""oslo.log in every service: the standard options really change where and how they log."""

import json
import signal
import subprocess
import time

from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support.daemon import filter_command, run_filter, start_filter
from tests.support.processes import console_script, write_config
from tests.support.services_procs import start_api


def _db(tmp_path) -> str:
    url = f"sqlite:///{tmp_path}/inspection.sqlite"
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    return url


def _hostsdir(tmp_path):
    path = tmp_path / "hostsdir"
    path.mkdir()
    return path


def test_filter_logs_to_log_file_instead_of_stderr(tmp_path):
    log_file = tmp_path / "filter.log.d" / "filter.log"
    log_file.parent.mkdir()
    result = run_filter(tmp_path, _db(tmp_path), _hostsdir(tmp_path), "--once", extra_conf={
        "DEFAULT": {"log_file": str(log_file), "use_stderr": False}})
    assert result.returncode == 0, result.stderr
    assert "First sync:" in log_file.read_text()
    assert "First sync:" not in result.stderr


def test_filter_logs_json_lines(tmp_path):
    result = run_filter(tmp_path, _db(tmp_path), _hostsdir(tmp_path), "--once",
                        extra_conf={"DEFAULT": {"use_json": True}})
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stderr.splitlines() if line.strip()]
    first = [r for r in records if r["message"].startswith("First sync:")]
    assert first and first[0]["levelname"] == "INFO" and first[0]["name"] == "pxe_filter.daemon"


def test_sighup_follows_debug_in_the_file_and_keeps_libraries_quiet(tmp_path):
    daemon = start_filter(tmp_path, _db(tmp_path), _hostsdir(tmp_path), debug=False,
                          extra_conf={"pxe_filter": {"sync_period": 0}})
    try:
        daemon.wait_ready()
        assert " DEBUG " not in daemon.log_text()
        text = daemon.config_path.read_text()

        def reload(debug: bool) -> int:
            daemon.config_path.write_text(text.replace(
                "[DEFAULT]\n", f"[DEFAULT]\ndebug = {str(debug).lower()}\n", 1))
            start = len(daemon.log_text())
            daemon.notifications.clear()
            daemon.signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while not (daemon.status() or "").startswith("reloaded"):
                assert time.monotonic() < deadline, daemon.log_text()
                daemon.collect(0.05)
            return start

        # An unchanged full sync is logged at DEBUG: it shows only while debug is on.
        start = reload(True)
        after = daemon.log_text()[start:]
        assert " DEBUG pxe_filter.daemon: Full sync:" in after
        assert " DEBUG stevedore" not in after and " DEBUG kombu" not in after
        start = reload(False)
        assert " DEBUG " not in daemon.log_text()[start:]
    finally:
        assert daemon.stop() == 0


def test_api_uses_log_config_append(tmp_path):
    target = tmp_path / "api-from-logging-conf.log"
    logging_conf = tmp_path / "logging.conf"
    logging_conf.write_text(
        "[loggers]\nkeys = root\n[handlers]\nkeys = file\n[formatters]\nkeys = plain\n"
        "[logger_root]\nlevel = INFO\nhandlers = file\n"
        f"[handler_file]\nclass = FileHandler\nargs = ({str(target)!r},)\n"
        "formatter = plain\n[formatter_plain]\nformat = %(levelname)s %(message)s\n")
    api = start_api(tmp_path, _db(tmp_path), extra_conf={
        "DEFAULT": {"log_config_append": str(logging_conf)}})
    try:
        api.wait_ready()
        assert "INFO Listening on http://127.0.0.1" in target.read_text()
        assert "Listening on" not in api.log_text()
    finally:
        assert api.stop() == 0


def test_journal_without_bindings_is_one_configuration_error(tmp_path):
    conf = write_config(tmp_path / "journal.conf", {"DEFAULT": {"use_journal": True}})
    for argv in ([*filter_command(), "--once"],
                 console_script("ironic-inspection-worker", "inspection.worker.cmd")):
        proc = subprocess.run([*argv, "--config-file", str(conf)], capture_output=True,
                              text=True, timeout=60)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2, proc.stderr
        assert len(lines) == 1 and "cannot set up logging" in lines[0], proc.stderr
