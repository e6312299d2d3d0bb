"""pxe_filter.common.logs: oslo.log with our defaults, run in a child (it sets up the root)."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import logging, sys
    from oslo_config import cfg
    from pxe_filter.common import logs
    conf = cfg.ConfigOpts()
    logs.register_options(conf, "test")
    conf(args=sys.argv[1:], default_config_files=[])
    logs.setup(conf, "test")
    # Logging must not select oslo.service's backend nor pull eventlet in.
    assert not {"eventlet", "oslo_messaging", "oslo_service.backend"} & set(sys.modules)
    log = logging.getLogger("pxe_filter.test")
    log.info("plain line")
    log.debug("debug line")
    logging.getLogger("kombu").info("library chatter")
    try:
        raise RuntimeError("postgresql://user:s3cret@db/x")
    except RuntimeError:
        log.error("cannot connect to postgresql://user:***@db/x")
        log.error("asked for", exc_info=True)
""")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True,
                          text=True, timeout=30)


def test_stderr_by_default_in_the_usual_line_shape():
    proc = _run()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0].endswith(" INFO pxe_filter.test: plain line"), lines
    assert "library chatter" not in proc.stderr


def test_handled_exception_is_not_appended_unless_asked_for():
    lines = _run().stderr.splitlines()
    masked = [line for line in lines if "cannot connect" in line]
    assert len(masked) == 1 and "s3cret" not in masked[0], lines
    asked = "\n".join(lines[lines.index(masked[0]) + 1:])
    assert "asked for" in asked and "Traceback" in asked and "s3cret" in asked


def test_debug_option_turns_debug_on():
    assert "debug line" not in _run().stderr
    proc = _run("--debug")
    assert proc.returncode == 0 and " DEBUG pxe_filter.test: debug line" in proc.stderr
    # Library levels stay as configured even with debug on.
    assert "library chatter" not in proc.stderr
