"""ironic-pxe-filter as a real process: databases, start-up checks, signals, failures."""

import fcntl
import os
import signal
import subprocess
import time
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from inspection.db import migration
from inspection.db.models import Node, Port
from pxe_filter.common.database import create_engine
from tests.support import services
from tests.support.daemon import filter_command, run_filter, start_filter, write_config
from tests.support.tcpproxy import TcpProxy

M1, M2, M3, M4 = ("52:54:00:00:00:01", "52:54:00:00:00:02", "52:54:00:00:00:03",
                  "52:54:00:00:00:04")
WILDCARD = "unknown_hosts_filter"
ALLOW_ALL, DENY_ALL = "*:*:*:*:*:*\n", "*:*:*:*:*:*,ignore\n"


def add_node(url, state, macs, interface="agent"):
    engine = create_engine(url)
    with engine.begin() as conn:
        node_id = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state=state, inspect_interface=interface,
            conductor_group="")).inserted_primary_key[0]
        for mac in macs:
            conn.execute(sa.insert(Port).values(uuid=str(uuid.uuid4()), address=mac,
                                                node_id=node_id))
    engine.dispose()
    return node_id


def set_state(url, node_id, state):
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.update(Node).where(Node.id == node_id).values(provision_state=state))
    engine.dispose()


def read(hostsdir, name):
    try:
        return (hostsdir / name).read_text()
    except FileNotFoundError:
        return None


def wait_content(hostsdir, name, expected, timeout=5.0):
    deadline = time.monotonic() + timeout
    while read(hostsdir, name) != expected:
        assert time.monotonic() < deadline, \
            f"{name} is {read(hostsdir, name)!r}, expected {expected!r}"
        time.sleep(0.02)


def snapshot(hostsdir):
    return {name: (hostsdir / name).read_bytes() for name in sorted(os.listdir(hostsdir))
            if not name.startswith(".")}


def critical_lines(output):
    return [line for line in output.splitlines() if " CRITICAL " in line]


@pytest.fixture
def hostsdir(tmp_path):
    path = tmp_path / "hostsdir"
    path.mkdir()
    return path


def test_daemon_follows_the_database(db_url, tmp_path, hostsdir):
    inspected = add_node(db_url, "inspect wait", [M1])
    add_node(db_url, "active", [M2])
    add_node(db_url, "inspecting", [M3], interface="redfish")  # unsupported interface
    (hostsdir / M4).write_text(f"{M4},ignore\n")  # a MAC whose port is gone
    (hostsdir / "README").write_text("not a MAC\n")
    daemon = start_filter(tmp_path, db_url, hostsdir, extra_conf={
        "pxe_filter": {"sync_period": 1}})
    try:
        daemon.wait_ready(30)
        assert read(hostsdir, M1) == f"{M1}\n"
        assert read(hostsdir, M2) == f"{M2},ignore\n"
        assert read(hostsdir, M3) == f"{M3},ignore\n"
        assert read(hostsdir, M4) == f"{M4}\n"  # node on inspection: unknown MACs allowed
        assert read(hostsdir, WILDCARD) == ALLOW_ALL
        assert not (hostsdir / "README").exists()  # dnsmasq would read it: removed
        assert "1 MAC(s) allowed, 2 denied" in daemon.status()
        # Inspection ends: the next periodic sync closes everything.
        set_state(db_url, inspected, "manageable")
        wait_content(hostsdir, M1, f"{M1},ignore\n", timeout=5)
        wait_content(hostsdir, WILDCARD, DENY_ALL)
        wait_content(hostsdir, M4, f"{M4},ignore\n")
        assert daemon.proc.poll() is None
    finally:
        assert daemon.stop() == 0
    log = daemon.log_text()
    assert "First sync: 1 allowed, 2 denied" in log
    assert "Traceback" not in log


def test_once_syncs_and_exits(sqlite_url, tmp_path, hostsdir):
    migration.upgrade(create_engine(sqlite_url))
    add_node(sqlite_url, "inspect wait", [M1])
    (hostsdir / "zz-extra").write_text(f"{M2}\n")
    result = run_filter(tmp_path, sqlite_url, hostsdir, "--once")
    assert result.returncode == 0, result.stderr
    assert read(hostsdir, M1) == f"{M1}\n"
    assert read(hostsdir, WILDCARD) == ALLOW_ALL
    assert read(hostsdir, "zz-extra") is None
    assert "applies the removed files until it is reloaded: send it SIGHUP" in result.stderr


def test_deny_unknown_macs_wins_over_discovery_with_a_warning(sqlite_url, tmp_path, hostsdir):
    migration.upgrade(create_engine(sqlite_url))
    add_node(sqlite_url, "inspect wait", [M1])
    result = run_filter(tmp_path, sqlite_url, hostsdir, "--once", extra_conf={
        "auto_discovery": {"enabled": True}, "pxe_filter": {"deny_unknown_macs": True}})
    assert result.returncode == 0, result.stderr
    assert "auto-discovery cannot work" in result.stderr
    assert read(hostsdir, WILDCARD) == DENY_ALL
    assert read(hostsdir, M1) == f"{M1}\n"


def test_sample_configuration_works_as_shipped(sqlite_url, tmp_path, hostsdir):
    sample = os.path.join(os.path.dirname(__file__), "..", "..", "etc", "ironic-pxe-filter",
                          "ironic-pxe-filter.conf")
    migration.upgrade(create_engine(sqlite_url))
    # Only the paths differ from the shipped file (later --config-file wins).
    override = write_config(tmp_path / "paths.conf", {
        "database": {"connection": sqlite_url}, "pxe_filter": {"dhcp_hostsdir": hostsdir}})
    proc = subprocess.run(
        [*filter_command(),
         "--config-file", sample, "--config-file", str(override), "--once"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert read(hostsdir, WILDCARD) == DENY_ALL


def test_reads_a_database_created_by_ironic_without_writing(tmp_path, hostsdir):
    # Ironic's own schema: more columns, more tables, and its alembic_version.
    url = f"sqlite:///{tmp_path}/ironic.sqlite"
    engine = create_engine(url)
    with engine.begin() as conn:
        for ddl in (
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)",
            "CREATE TABLE conductors (id INTEGER PRIMARY KEY, hostname VARCHAR(255))",
            "CREATE TABLE nodes (id INTEGER PRIMARY KEY, uuid VARCHAR(36), "
            "power_state VARCHAR(15), provision_state VARCHAR(15), "
            "inspect_interface VARCHAR(255), owner VARCHAR(255), lessee VARCHAR(255), "
            "shard VARCHAR(255), version VARCHAR(15))",
            "CREATE TABLE ports (id INTEGER PRIMARY KEY, uuid VARCHAR(36), "
            "address VARCHAR(18), node_id INTEGER, is_smartnic BOOLEAN, "
            "name VARCHAR(255), version VARCHAR(15))",
            "INSERT INTO alembic_version VALUES ('c0455649680c')",
            "INSERT INTO nodes (id, uuid, provision_state, inspect_interface) VALUES "
            "(1, 'a', 'inspect wait', 'agent'), (2, 'b', 'available', 'agent')",
            "INSERT INTO ports (id, uuid, address, node_id) VALUES "
            f"(1, 'p1', '{M1}', 1), (2, 'p2', '{M2}', 2)",
        ):
            conn.execute(sa.text(ddl))
    dump = _dump(engine)
    result = run_filter(tmp_path, url, hostsdir, "--once")
    assert result.returncode == 0, result.stderr
    assert read(hostsdir, M1) == f"{M1}\n" and read(hostsdir, M2) == f"{M2},ignore\n"
    assert _dump(engine) == dump
    engine.dispose()


def _dump(engine):
    with engine.connect() as conn:
        names = sorted(sa.inspect(conn).get_table_names())
        return {name: conn.execute(sa.text(f"SELECT * FROM {name}")).all() for name in names}


def test_needs_select_on_six_columns_only(pg_url, tmp_path, hostsdir):
    """A PostgreSQL role that may read only the six columns of a full sync is enough (and
    cannot write)."""
    engine = create_engine(pg_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(sa.delete(Port))
        conn.execute(sa.delete(Node))
    engine.dispose()
    add_node(pg_url, "inspecting", [M1])
    role = f"pxero_{uuid.uuid4().hex[:8]}"
    database = make_url(pg_url).database
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(sa.text(f"GRANT CONNECT ON DATABASE {database} TO {role}"))
        conn.execute(sa.text(f"GRANT USAGE ON SCHEMA public TO {role}"))
        conn.execute(sa.text(f"GRANT SELECT (address, node_id) ON ports TO {role}"))
        conn.execute(sa.text(
            f"GRANT SELECT (id, uuid, provision_state, inspect_interface) ON nodes TO {role}"))
    try:
        url = make_url(pg_url).set(username=role).render_as_string(hide_password=False)
        result = run_filter(tmp_path, url, hostsdir, "--once")
        assert result.returncode == 0, result.stderr
        assert read(hostsdir, M1) == f"{M1}\n"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP OWNED BY {role}"))
            conn.execute(sa.text(f"DROP ROLE {role}"))
        admin.dispose()


def test_missing_hostsdir_is_created_readable_by_dnsmasq(sqlite_url, tmp_path):
    migration.upgrade(create_engine(sqlite_url))
    hostsdir = tmp_path / "lib" / "ironic-pxe-filter" / "hostsdir"
    result = run_filter(tmp_path, sqlite_url, hostsdir, "--once")
    assert result.returncode == 0, result.stderr
    assert read(hostsdir, WILDCARD) == DENY_ALL
    for path in (hostsdir, hostsdir.parent, hostsdir.parent.parent):
        assert path.stat().st_mode & 0o777 == 0o755
    assert f"Created [pxe_filter]dhcp_hostsdir {hostsdir}" in result.stderr


@pytest.mark.parametrize("case", ["missing", "file", "readonly", "unset"])
def test_bad_hostsdir_refused_with_one_line(case, sqlite_url, tmp_path):
    migration.upgrade(create_engine(sqlite_url))
    path = tmp_path / "hostsdir"
    extra = {}
    if case == "missing":
        # Missing and impossible to create (a file where its parent should be).
        (tmp_path / "not-a-dir").write_text("")
        path = tmp_path / "not-a-dir" / "hostsdir"
    elif case == "file":
        path.write_text("oops\n")
    elif case == "readonly":
        path.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs",
                                  str(path)], capture_output=True, text=True)
        if mounted.returncode != 0:
            services.unavailable("a read-only tmpfs mount", mounted.stderr.strip())
    elif case == "unset":
        extra = {"pxe_filter": {"dhcp_hostsdir": ""}}
    try:
        result = run_filter(tmp_path, sqlite_url, path, extra_conf=extra)
    finally:
        if case == "readonly":
            subprocess.run(["umount", str(path)], check=True)
    assert result.returncode == 2
    lines = critical_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    expected = {"missing": "does not exist", "file": "is not a directory",
                "readonly": "is not writable", "unset": "is not set"}[case]
    assert expected in lines[0] and "dhcp_hostsdir" in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("extra,expected", [
    ({"pxe_filter": {"sync_period": -1}}, "sync_period"),
    ({"auto_discovery": {"enabled": "maybe"}}, "enabled"),
    ({"database": {"connection": "nonsense://"}}, "connection"),
    ({"pxe_filter": {"ironic_notifications": True}}, "needs Ironic's message bus"),
    ({"pxe_filter": {"ironic_notifications": True},
      "oslo_messaging_notifications": {"transport_url": "kafka://127.0.0.1:9092"}},
     "RabbitMQ only"),
    ({"pxe_filter": {"ironic_notifications": True},
      "oslo_messaging_notifications": {"transport_url": "rabbit://u:p@127.0.0.1/?ssl=maybe"}},
     "transport URL option ssl='maybe' is not valid"),
    ({"pxe_filter": {"ironic_notifications": True},
      "oslo_messaging_notifications": {"transport_url": "rabbit://u:p@127.0.0.1/?ssl=1"},
      "oslo_messaging_rabbit": {"ssl_version": "SSLv1"}},
     "ssl_version 'SSLv1' is not available"),
])
def test_bad_options_exit_2(extra, expected, sqlite_url, tmp_path, hostsdir):
    result = run_filter(tmp_path, sqlite_url, hostsdir, extra_conf=extra)
    assert result.returncode == 2, result.stderr
    lines = critical_lines(result.stderr)
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert os.listdir(hostsdir) == []  # refused before touching anything


def test_state_file_in_the_hostsdir_is_refused(sqlite_url, tmp_path, hostsdir):
    # dnsmasq would read it, and the filter removes files it does not manage from there.
    result = run_filter(tmp_path, sqlite_url, hostsdir, extra_conf={
        "pxe_filter": {"state_file": str(hostsdir / "status.json")}})
    assert result.returncode == 2, result.stderr
    lines = critical_lines(result.stderr)
    assert len(lines) == 1 and "is in the hostsdir" in lines[0], result.stderr
    assert os.listdir(hostsdir) == []


def test_missing_config_file_exits_2(tmp_path):
    proc = subprocess.run([*filter_command(), "--config-file", str(tmp_path / "nope.conf")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "nope.conf" in proc.stderr and "Traceback" not in proc.stderr


def test_unreachable_database_at_start(tmp_path, hostsdir):
    url = "postgresql+psycopg2://nobody:s3cret@127.0.0.1:1/none"
    result = run_filter(tmp_path, url, hostsdir)
    assert result.returncode == 1
    lines = critical_lines(result.stderr)
    assert len(lines) == 1 and "cannot connect to database" in lines[0], result.stderr
    assert "s3cret" not in result.stderr
    assert os.listdir(hostsdir) == []


def test_missing_sqlite_file_is_not_created(sqlite_url, tmp_path, hostsdir):
    result = run_filter(tmp_path, sqlite_url, hostsdir)
    assert result.returncode == 2
    lines = critical_lines(result.stderr)
    assert len(lines) == 1 and "does not exist" in lines[0] and "dbsync" in lines[0]
    assert not os.path.exists(make_url(sqlite_url).database)
    assert os.listdir(hostsdir) == []


def test_database_without_schema_at_start(sqlite_url, tmp_path, hostsdir):
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE something_else (id INTEGER)"))
    engine.dispose()
    result = run_filter(tmp_path, sqlite_url, hostsdir)
    assert result.returncode == 1
    lines = critical_lines(result.stderr)
    assert len(lines) == 1 and "dbsync" in lines[0], result.stderr
    # Nothing was served in the meantime: the deny wildcard went first.
    assert read(hostsdir, WILDCARD) == DENY_ALL


def test_second_daemon_on_the_same_hostsdir_is_refused(sqlite_url, tmp_path, hostsdir):
    migration.upgrade(create_engine(sqlite_url))
    first = start_filter(tmp_path, sqlite_url, hostsdir, name="first")
    try:
        first.wait_ready(30)
        result = run_filter(tmp_path, sqlite_url, hostsdir, name="second")
        assert result.returncode == 1
        lines = critical_lines(result.stderr)
        assert len(lines) == 1, result.stderr
        assert f"pid {first.pid}" in lines[0] and str(hostsdir) in lines[0]
        assert first.proc.poll() is None
    finally:
        assert first.stop() == 0
    # The lock went with the first daemon.
    assert run_filter(tmp_path, sqlite_url, hostsdir, "--once", name="third").returncode == 0


def test_sighup_rereads_mutable_options(sqlite_url, tmp_path, hostsdir):
    migration.upgrade(create_engine(sqlite_url))
    add_node(sqlite_url, "active", [M1])
    daemon = start_filter(tmp_path, sqlite_url, hostsdir, extra_conf={
        "pxe_filter": {"sync_period": 0}})  # no periodic sync: only SIGHUP can change it
    try:
        daemon.wait_ready(30)
        assert read(hostsdir, WILDCARD) == DENY_ALL
        text = daemon.config_path.read_text() + "\n[auto_discovery]\nenabled = true\n"
        daemon.config_path.write_text(text)
        daemon.signal(signal.SIGHUP)
        wait_content(hostsdir, WILDCARD, ALLOW_ALL)
        assert read(hostsdir, M1) == f"{M1},ignore\n"
        # A broken file is reported and the previous options stay.
        daemon.config_path.write_text(text + "\n[pxe_filter]\nsync_period = -5\n")
        daemon.signal(signal.SIGHUP)
        daemon.wait_log("Configuration not reloaded")
        assert daemon.proc.poll() is None
        assert read(hostsdir, WILDCARD) == ALLOW_ALL
        # So is a bad value of an option read between syncs (the poll's, the purge's): the
        # main loop keeps the options it has, it never reads the refused ones.
        start = len(daemon.log_text())
        daemon.config_path.write_text(text + "\n[pxe_filter]\npoll_interval = often\n"
                                             "purge_stale_files = maybe\n")
        daemon.signal(signal.SIGHUP)
        log = daemon.wait_log("Configuration not reloaded", start=start)
        assert "poll_interval" in log[start:] or "purge_stale_files" in log[start:]
        # No periodic sync: only the poll, with the options it kept, brings this node's MAC.
        add_node(sqlite_url, "inspect wait", [M2])
        wait_content(hostsdir, M2, f"{M2}\n")
        assert daemon.proc.poll() is None and "Traceback" not in daemon.log_text()
    finally:
        assert daemon.stop() == 0


def test_sigterm_mid_sync_exits_promptly_without_partial_files(sqlite_url, tmp_path,
                                                               hostsdir):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        node_id = conn.execute(sa.insert(Node).values(
            uuid=str(uuid.uuid4()), provision_state="active",
            conductor_group="")).inserted_primary_key[0]
        conn.execute(sa.insert(Port), [
            {"uuid": str(uuid.uuid4()), "address": f"52:54:00:01:{i >> 8:02x}:{i & 255:02x}",
             "node_id": node_id} for i in range(30000)])
    engine.dispose()
    daemon = start_filter(tmp_path, sqlite_url, hostsdir, debug=False)
    try:
        daemon.wait_log("Managing", timeout=30)
        time.sleep(0.3)  # somewhere in the first sync's 30000 writes
        start = time.monotonic()
        daemon.signal(signal.SIGTERM)
        code = daemon.wait(5)
        elapsed = time.monotonic() - start
    finally:
        daemon.stop()
    assert code == 0, daemon.log_text()
    assert elapsed < 2.5
    # It was stopped inside the first sync, not after it: the sync says so, and fewer
    # than the 30000 files were written.
    assert "Sync interrupted by shutdown" in daemon.log_text()
    assert "Ready" not in daemon.log_text()
    assert len([n for n in os.listdir(hostsdir) if not n.startswith(".")]) < 30001
    names = os.listdir(hostsdir)
    # No temporary file left: only the lock, the status file (issue 3) and the reserved
    # deny wildcard (issue 11) are dotfiles.
    assert sorted(n for n in names if n.startswith(".")) == [
        ".ironic-pxe-filter.lock", ".ironic-pxe-filter.status.json",
        ".unknown_hosts_filter.reserve"]
    for name in names:
        if not name.startswith("."):
            data = read(hostsdir, name)
            assert data in (f"{name},ignore\n", DENY_ALL), (name, data)
    with open(hostsdir / ".ironic-pxe-filter.lock") as lock:  # released
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_database_lost_during_operation(pg_url, tmp_path, hostsdir):
    engine = create_engine(pg_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(sa.delete(Port))
        conn.execute(sa.delete(Node))
    engine.dispose()
    node = add_node(pg_url, "inspect wait", [M1])
    target = make_url(pg_url)
    with TcpProxy(target.host or "127.0.0.1", target.port or 5432) as proxy:
        url = target.set(host="127.0.0.1", port=proxy.port).render_as_string(
            hide_password=False)
        daemon = start_filter(tmp_path, url, hostsdir, extra_conf={
            "pxe_filter": {"sync_period": 1}, "database": {"connect_timeout": 2}})
        try:
            daemon.wait_ready(30)
            before = snapshot(hostsdir)
            proxy.stop()  # the database server is gone for the daemon
            set_state(pg_url, node, "available")
            mark = len(daemon.log_text())
            daemon.wait_log("Sync skipped, files left as they are", timeout=10, start=mark)
            daemon.wait_log("Sync skipped, files left as they are", timeout=10,
                            start=len(daemon.log_text()))  # retried, still failing
            assert snapshot(hostsdir) == before
            assert daemon.proc.poll() is None
            proxy.start()  # back: the next sync catches up
            wait_content(hostsdir, M1, f"{M1},ignore\n", timeout=10)
            wait_content(hostsdir, WILDCARD, DENY_ALL)
        finally:
            assert daemon.stop() == 0
    log = daemon.log_text()
    assert "check [database]connection" in log and "Traceback" not in log


def test_long_database_outage_denies_unknown_macs_until_it_answers(pg_url, tmp_path,
                                                                   hostsdir):
    engine = create_engine(pg_url)
    migration.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(sa.delete(Port))
        conn.execute(sa.delete(Node))
    engine.dispose()
    add_node(pg_url, "inspect wait", [M1])  # on inspection: unknown MACs allowed
    add_node(pg_url, "manageable", [M2])
    target = make_url(pg_url)
    with TcpProxy(target.host or "127.0.0.1", target.port or 5432) as proxy:
        url = target.set(host="127.0.0.1", port=proxy.port).render_as_string(
            hide_password=False)
        daemon = start_filter(tmp_path, url, hostsdir, extra_conf={
            "pxe_filter": {"sync_period": 1, "database_outage_deny_unknown": 3},
            "database": {"connect_timeout": 1}})
        try:
            daemon.wait_ready(30)
            assert read(hostsdir, WILDCARD) == ALLOW_ALL
            proxy.stop()
            lost = time.monotonic()
            daemon.wait_log("Sync skipped", timeout=10)
            assert read(hostsdir, WILDCARD) == ALLOW_ALL  # a short outage changes nothing
            wait_content(hostsdir, WILDCARD, DENY_ALL, timeout=10)
            closed_after = time.monotonic() - lost
            assert closed_after >= 2, closed_after
            daemon.wait_log("MACs of no port are denied until the database answers again")
            # Known MACs keep their last verdict.
            assert read(hostsdir, M1) == f"{M1}\n"
            assert read(hostsdir, M2) == f"{M2},ignore\n"
            time.sleep(3)  # the outage goes on: said once, not once a second
            assert daemon.log_text().count("MACs of no port are denied until") == 1, \
                daemon.log_text()
            proxy.start()
            wait_content(hostsdir, WILDCARD, ALLOW_ALL, timeout=10)
            daemon.wait_log("The database answers again: unknown MACs follow the policy")
            print(f"unknown MACs denied {closed_after:.1f} s into the outage")
        finally:
            assert daemon.stop() == 0, daemon.log_text()
