"""dbsync against real SQLite, PostgreSQL and MariaDB, and its refusal of Ironic's database."""

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from inspection.cli import main
from inspection.db import migration
from inspection.db.models import Base
from pxe_filter.common.database import create_engine


def _write_conf(tmp_path, url):
    path = tmp_path / "inspection.conf"
    path.write_text(f"[database]\nconnection = {url}\n")
    return str(path)


def test_dbsync_creates_then_reports_current(db_url, tmp_path, capsys):
    conf = _write_conf(tmp_path, db_url)
    assert main(["dbsync", "--config-file", conf]) == 0
    out = capsys.readouterr().out
    assert "already at revision" in out  # the fixture migrated it already
    engine = create_engine(db_url)
    assert migration.current_revision(engine) == migration.head_revision()
    tables = set(sa.inspect(engine).get_table_names())
    assert {"nodes", "ports", "portgroups", "node_traits", "node_inventory",
            "inspection_rules"} <= tables
    engine.dispose()


def test_dbsync_on_empty_sqlite_creates_schema(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/fresh.sqlite"
    assert main(["dbsync", "--config-file", _write_conf(tmp_path, url)]) == 0
    assert "Created schema revision" in capsys.readouterr().out


def test_dbsync_creates_the_directory_of_the_sqlite_file(tmp_path, capsys):
    state = tmp_path / "var" / "lib" / "ironic-inspection"
    url = f"sqlite:///{state}/inspection.sqlite"
    assert main(["dbsync", "--config-file", _write_conf(tmp_path, url)]) == 0
    assert "Created schema revision" in capsys.readouterr().out
    for path in (state, state.parent):
        assert path.stat().st_mode & 0o777 == 0o750  # the database holds BMC credentials


def test_dbsync_says_when_it_cannot_create_the_directory(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    url = f"sqlite:///{tmp_path}/file/state/inspection.sqlite"
    assert main(["dbsync", "--config-file", _write_conf(tmp_path, url)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cannot be created" in err and f"{tmp_path}/file/state" in err


def test_migrations_match_models(db_url):
    engine = create_engine(db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    # Our version table is not a model, nor are the backend-specific indexes (and MariaDB's
    # invisible columns) on the hardware identity (migration 0007); everything else must
    # match exactly.
    diff = [d for d in diff
            if not (d[0] == "remove_table" and d[1].name == migration.VERSION_TABLE)
            and not (d[0] == "remove_index" and d[1].name.startswith("nodes_hardware_"))
            and not (d[0] == "remove_column" and d[3].name.startswith("hardware_"))]
    assert diff == []


def test_dbsync_refuses_a_database_created_by_ironic(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/ironic.sqlite"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32))"))
        conn.execute(sa.text("INSERT INTO alembic_version VALUES ('c0455649680c')"))
        conn.execute(sa.text("CREATE TABLE conductors (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    assert main(["dbsync", "--config-file", _write_conf(tmp_path, url)]) == 1
    err = capsys.readouterr().err
    assert "created by Ironic" in err and "ironic-dbsync" in err
    engine = create_engine(url)
    assert set(sa.inspect(engine).get_table_names()) == {"alembic_version", "conductors"}
    engine.dispose()


def test_dbsync_reports_unreachable_database_in_one_line(tmp_path, capsys):
    url = "postgresql+psycopg2://nobody:secret@127.0.0.1:1/none"
    assert main(["dbsync", "--config-file", _write_conf(tmp_path, url)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("ironic-inspection:") and "\n" not in err
    assert "secret" not in err


def test_dbsync_reports_missing_config_file(tmp_path, capsys):
    assert main(["dbsync", "--config-file", str(tmp_path / "nope.conf")]) == 2
    assert "nope.conf" in capsys.readouterr().err


def test_read_only_engine_leaves_the_sqlite_journal_mode_alone(tmp_path):
    url = f"sqlite:///{tmp_path}/ironic.sqlite"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE nodes (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    reader = create_engine(url, read_only=True)
    with reader.connect() as conn:
        conn.execute(sa.text("SELECT count(*) FROM nodes"))
        assert conn.execute(sa.text("PRAGMA journal_mode")).scalar() == "delete"
    reader.dispose()
    writer = create_engine(url)
    with writer.connect() as conn:
        assert conn.execute(sa.text("PRAGMA journal_mode")).scalar() == "wal"
    writer.dispose()


def test_config_options_may_come_before_the_command(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/leading.sqlite"
    conf = _write_conf(tmp_path, url)
    assert main(["--config-file", conf, "dbsync"]) == 0
    assert "Created schema revision" in capsys.readouterr().out
    assert main([f"--config-file={conf}", "dbsync"]) == 0
    assert "already at revision" in capsys.readouterr().out


def test_upgrade_to_callback_attempts_keeps_the_newest_callback_of_each_node(sqlite_url):
    engine = create_engine(sqlite_url)
    migration.upgrade(engine, "0003_ironic_node_fields")
    rows = sa.table("inspection_callbacks", sa.column("node_uuid"), sa.column("data"),
                    sa.column("created_at"), sa.column("attempts"))
    with engine.begin() as conn:
        for node, n in (("a", 1), ("b", 2), ("a", 3)):
            conn.execute(sa.insert(rows).values(node_uuid=node, data=f'{{"n": {n}}}',
                                                created_at=sa.func.current_timestamp(),
                                                attempts=0))
    migration.upgrade(engine)
    with engine.connect() as conn:
        kept = conn.execute(sa.text("SELECT node_uuid, data, attempt FROM "
                                    "inspection_callbacks ORDER BY node_uuid")).all()
    assert [tuple(r) for r in kept] == [("a", '{"n": 3}', None), ("b", '{"n": 2}', None)]
    engine.dispose()
