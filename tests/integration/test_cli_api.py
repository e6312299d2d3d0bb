"""``ironic-inspection`` rule/node/port commands against a real ironic-inspection-api process.

One API process (all-in-one, SQLite, noauth on loopback) serves the whole module; each test
works on objects of its own. Most commands run in-process through ``main()`` (fast); the
output, exit statuses and one-line errors are what a script or an admin sees.
"""

import json
import subprocess
import sys
import uuid
from pathlib import Path

import bcrypt
import pytest

from inspection.cli import main
from inspection.db import migration
from pxe_filter.common.database import create_engine
from tests.support.services_procs import console_script, start_api

RULE = {"description": "tag lab nodes", "priority": 10,
        "conditions": [{"op": "eq", "args": [1, 1]}],
        "actions": [{"op": "set-attribute", "args": ["/extra/tagged", "yes"]}]}


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli-api")
    url = f"sqlite:///{tmp}/inspection.sqlite"
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    proc = start_api(tmp, url)
    try:
        proc.wait_http()
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_text()


@pytest.fixture
def cli(api, capsys, monkeypatch):
    """run(*argv) -> (exit status, stdout, stderr), talking to the module's API."""
    monkeypatch.setenv("IRONIC_INSPECTION_URL", api.url)

    def run(*argv):
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err
    return run


def _json(cli, *argv):
    code, out, err = cli(*argv, "-f", "json")
    assert code == 0, err
    return json.loads(out)


def test_rule_lifecycle_create_show_set_unset_delete(cli):
    rule = _json(cli, "rule", "create", "--actions", json.dumps(RULE["actions"]),
                 "--conditions", json.dumps(RULE["conditions"]), "--priority", "10",
                 "--description", "first", "--scope", "lab", "--phase", "main")
    assert rule["priority"] == 10 and rule["scope"] == "lab" and rule["actions"]
    shown = _json(cli, "rule", "show", rule["uuid"])
    assert shown["description"] == "first" and shown["conditions"] == RULE["conditions"]

    changed = _json(cli, "rule", "set", rule["uuid"], "--priority", "20",
                    "--description", "second")
    assert (changed["priority"], changed["description"]) == (20, "second")
    unset = _json(cli, "rule", "unset", rule["uuid"], "--scope", "--description")
    assert unset["scope"] is None and unset["description"] is None

    code, out, _ = cli("rule", "list")
    assert code == 0 and rule["uuid"] in out and "Priority" in out  # a table
    code, out, _ = cli("rule", "delete", rule["uuid"])
    assert code == 0
    code, _, err = cli("rule", "show", rule["uuid"])
    assert code == 1 and err.count("\n") == 1 and "HTTP 404" in err


def test_sensitive_rule_cannot_be_made_visible(cli):
    rule = _json(cli, "rule", "create", "--actions", json.dumps(RULE["actions"]),
                 "--sensitive")
    assert rule["sensitive"] is True and rule["actions"] is None
    code, _, err = cli("rule", "set", rule["uuid"], "--description", "x", "--priority",
                       "1")
    assert code == 0, err
    code, out, _ = cli("rule", "show", rule["uuid"])
    assert code == 0 and "set-attribute" not in out and "/extra/tagged" not in out
    shown = _json(cli, "rule", "show", rule["uuid"])
    assert shown["sensitive"] is True and shown["description"] == "x"
    cli("rule", "delete", rule["uuid"])


def test_invalid_rule_reports_every_problem_in_one_line(cli):
    code, out, err = cli("rule", "create", "--actions",
                         json.dumps([{"op": "no-such-action", "args": []}]),
                         "--priority", "123456")
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "HTTP 400" in lines[0]
    assert "no-such-action" in lines[0] and "priority" in lines[0]
    assert "Traceback" not in err


def test_import_yaml_and_json_one_or_many(cli, tmp_path):
    many = tmp_path / "rules.yaml"
    many.write_text("- description: imported one\n  actions:\n"
                    "    - op: set-attribute\n      args: [/extra/a, '1']\n"
                    "- description: imported two\n  priority: 5\n  actions:\n"
                    "    - op: set-attribute\n      args: [/extra/b, '2']\n")
    one = tmp_path / "rule.json"
    one.write_text(json.dumps({**RULE, "description": "imported three"}))
    created = _json(cli, "rule", "import", str(many)) + _json(cli, "rule", "import", str(one))
    assert [r["description"] for r in created] == ["imported one", "imported two",
                                                    "imported three"]
    listed = {r["uuid"] for r in _json(cli, "rule", "list", "--long")}
    assert {r["uuid"] for r in created} <= listed
    code, _, _ = cli("rule", "delete", "--all")
    assert code == 0
    assert _json(cli, "rule", "list") == []


def test_import_reports_bad_rules_and_keeps_the_good_ones(cli, tmp_path):
    path = tmp_path / "mixed.yaml"
    path.write_text("- description: good\n  actions: [{op: set-attribute, args: [/extra/g, "
                    "'1']}]\n- description: bad\n  actions: []\n")
    code, out, err = cli("rule", "import", str(path), "-f", "json")
    assert code == 1
    assert [r["description"] for r in json.loads(out)] == ["good"]
    assert "1 of 2 rule(s) not imported" in err and "rule 2 (bad)" in err
    assert err.count("\n") == 1
    cli("rule", "delete", "--all")


@pytest.mark.parametrize("content", ["- [unclosed", "42", "[]"])
def test_import_refuses_unreadable_files_without_calling_the_api(cli, tmp_path, content):
    path = tmp_path / "broken.yaml"
    path.write_text(content)
    code, _, err = cli("rule", "import", str(path))
    assert code == 1 and err.count("\n") == 1 and str(path) in err
    code, _, err = cli("rule", "import", str(tmp_path / "missing.yaml"))
    assert code == 1 and "cannot read" in err


def test_node_and_port_commands(cli, tmp_path):
    name = f"node-{uuid.uuid4().hex[:6]}"
    node = _json(cli, "node", "create", "--driver", "fake-hardware", "--name", name,
                 "--driver-info", '{"ipmi_address": "192.0.2.9", "ipmi_password": "s3cret"}')
    assert node["provision_state"] == "enroll"
    assert node["driver_info"]["ipmi_password"] == "******"
    mac = "52:54:00:AB:CD:" + uuid.uuid4().hex[:2]
    port = _json(cli, "port", "create", mac, "--node", name)
    assert port["address"] == mac.lower() and port["node_uuid"] == node["uuid"]
    assert [p["address"] for p in _json(cli, "port", "list", "--node", name)] == [mac.lower()]

    code, out, _ = cli("node", "manage", name)
    assert code == 0 and "manageable" in out
    code, out, _ = cli("node", "inspect", name)
    assert code == 0 and "inspect wait" in out
    waiting = _json(cli, "node", "list", "--provision-state", "inspect wait")
    assert node["uuid"] in [n["uuid"] for n in waiting]
    code, out, _ = cli("node", "abort", name)
    assert code == 0 and "inspect failed" in out
    assert _json(cli, "node", "show", name)["last_error"]
    assert node["uuid"] not in [n["uuid"] for n in _json(cli, "node", "list",
                                                         "--auto-discovered")]
    # No inventory yet: a one-line 404 and no file written.
    target = tmp_path / "inventory.json"
    code, _, err = cli("node", "inventory", "save", name, "--file", str(target))
    assert code == 1 and "no stored inventory" in err and not target.exists()


def test_bad_mac_and_unknown_node_are_one_line_errors(cli):
    code, _, err = cli("port", "create", "not-a-mac", "--node", "whatever")
    assert code == 1 and err.count("\n") == 1
    code, _, err = cli("node", "show", "../../etc/passwd")
    assert code == 1 and "HTTP 404" in err and err.count("\n") == 1
    code, _, err = cli("node", "inspect", "no-such-node")
    assert code == 1 and "HTTP 404" in err


def test_unreachable_api_and_usage_errors(monkeypatch, capsys):
    monkeypatch.setenv("IRONIC_INSPECTION_URL", "http://127.0.0.1:9")
    assert main(["rule", "list"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the API at http://127.0.0.1:9" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as exc:
        main(["rule", "create", "--actions", "[not json"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["rule", "delete-everything"])
    assert exc.value.code == 2


def test_api_options_may_come_before_the_command(api, cli, monkeypatch):
    monkeypatch.setenv("IRONIC_INSPECTION_URL", "http://127.0.0.1:9")  # only --url works
    code, out, err = cli("--url", api.url, "-f", "json", "rule", "list")
    assert code == 0, err
    assert isinstance(json.loads(out), list)
    code, out, err = cli(f"--url={api.url}", "node", "list", "-f", "json")
    assert code == 0 and isinstance(json.loads(out), list)


@pytest.mark.parametrize(("argv", "words"), [
    (["--config-file", "x.conf", "rule", "list"], "--config-file cannot be used with "
                                                   "'rule list'"),
    (["--url", "http://127.0.0.1:9", "dbsync"], "--url cannot be used with 'dbsync'"),
])
def test_options_before_a_command_that_lacks_them_are_usage_errors(capsys, argv, words):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "invalid choice" not in err


def test_usage_errors_the_parser_cannot_see_exit_2(cli):
    for argv, words in ((("rule", "delete"), "give rule IDs or --all"),
                        (("rule", "delete", "--all", str(uuid.uuid4())), "not both"),
                        (("rule", "set", str(uuid.uuid4())), "nothing to change"),
                        (("rule", "unset", str(uuid.uuid4())), "nothing to unset"),
                        (("rule", "list", "--url", "ftp://x"), "--url must be"),
                        (("filters", "notify"), "nothing to send"),
                        (("filters", "notify", "--allow", "zz:zz"),
                         "invalid MAC address 'zz:zz'")):
        code, _, err = cli(*argv)
        assert code == 2, (argv, err)
        assert words in err and err.count("\n") == 1


def test_console_script_never_prints_a_traceback(api, tmp_path):
    script = console_script("ironic-inspection", "inspection.cli")
    env = {"IRONIC_INSPECTION_URL": api.url, "PATH": str(Path(sys.executable).parent)}
    proc = subprocess.run([*script, "rule", "show", "not-a-uuid"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("ironic-inspection: ") and proc.stderr.count("\n") == 1
    proc = subprocess.run([*script, "node", "list", "-f", "json"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0 and isinstance(json.loads(proc.stdout), list)


def test_http_basic_credentials_from_options_or_environment(tmp_path, monkeypatch, capsys):
    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text("admin:" + bcrypt.hashpw(b"pw1", bcrypt.gensalt(4)).decode() + "\n")
    url = f"sqlite:///{tmp_path}/auth.sqlite"
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    proc = start_api(tmp_path, url, name="api-auth", extra_conf={"api": {
        "auth_strategy": "http_basic", "http_basic_auth_user_file": str(htpasswd)}})
    try:
        proc.wait_http()
        monkeypatch.setenv("IRONIC_INSPECTION_URL", proc.url)
        monkeypatch.delenv("IRONIC_INSPECTION_USERNAME", raising=False)
        monkeypatch.delenv("IRONIC_INSPECTION_PASSWORD", raising=False)
        assert main(["rule", "list"]) == 1
        assert "HTTP 401" in capsys.readouterr().err
        assert main(["rule", "list", "--username", "admin", "--password", "wrong"]) == 1
        assert "HTTP 401" in capsys.readouterr().err
        assert main(["rule", "list", "--username", "admin", "--password", "pw1"]) == 0
        capsys.readouterr()
        monkeypatch.setenv("IRONIC_INSPECTION_USERNAME", "admin")
        monkeypatch.setenv("IRONIC_INSPECTION_PASSWORD", "pw1")
        assert main(["node", "list", "-f", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == []
    finally:
        assert proc.stop() == 0


def test_lists_follow_the_api_pages(tmp_path, monkeypatch, capsys):
    url = f"sqlite:///{tmp_path}/inspection.sqlite"
    engine = create_engine(url)
    migration.upgrade(engine)
    engine.dispose()
    proc = start_api(tmp_path, url, extra_conf={"api": {"max_limit": 2}})
    try:
        proc.wait_http()
        monkeypatch.setenv("IRONIC_INSPECTION_URL", proc.url)
        names = [f"paged-{i}" for i in range(5)]
        for name in names:
            assert main(["node", "create", "--driver", "ipmi", "--name", name]) == 0
        capsys.readouterr()
        assert main(["node", "list", "-f", "json"]) == 0
        assert [n["name"] for n in json.loads(capsys.readouterr().out)] == names
    finally:
        assert proc.stop() == 0, proc.log_text()
