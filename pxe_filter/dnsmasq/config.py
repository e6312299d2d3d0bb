"""Render the dnsmasq configuration, check it with ``dnsmasq --test``, install it atomically.

The file dnsmasq reads is only ever replaced by a ``rename()`` of a complete file that
dnsmasq itself accepted, so a bad option value or a broken template leaves the running
configuration untouched.
"""

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import jinja2

from pxe_filter import leases
from pxe_filter.dnsmasq.settings import DnsmasqConfigError, DnsmasqSettings

TEMPLATE_NAME = "dnsmasq.conf.j2"
FILE_MODE = 0o644  # dnsmasq reads it as root, operators read it to debug
_TEST_TIMEOUT = 30
_SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")
# Where the shipped template lives: the source tree (editable installs), then data dirs.
_TEMPLATE_DIRS = (
    Path(__file__).resolve().parents[2] / "etc" / "dnsmasq",
    Path(sys.prefix) / "share" / "ironic-pxe-filter",
    Path("/usr/local/share/ironic-pxe-filter"),
    Path("/usr/share/ironic-pxe-filter"),
    Path("/etc/ironic-pxe-filter"),
)
_LINE = re.compile(r"at line (\d+) of \S+")


class DnsmasqTestFailed(DnsmasqConfigError):
    """``dnsmasq --test`` refused the rendered configuration; the message quotes dnsmasq's."""


def find_template(template: str | None = None) -> Path:
    """The template file to render: ``template`` if given, else the shipped one."""
    if template:
        path = Path(template)
        if not path.is_file():
            raise DnsmasqConfigError(f"[dnsmasq]template {template!r} is not a readable file")
        return path
    for directory in _TEMPLATE_DIRS:
        if (directory / TEMPLATE_NAME).is_file():
            return directory / TEMPLATE_NAME
    searched = ", ".join(str(d) for d in _TEMPLATE_DIRS)
    raise DnsmasqConfigError(f"{TEMPLATE_NAME} not found in {searched}: install it there or "
                             "set [dnsmasq]template")


def find_dnsmasq(binary: str = "dnsmasq") -> str:
    """Absolute path of the dnsmasq executable (PATH, then the sbin directories)."""
    # which() takes a path with a directory as it is, and searches for a bare name.
    found = shutil.which(binary, path=os.pathsep.join([os.environ.get("PATH", ""), *_SBIN]))
    if not found:
        raise DnsmasqConfigError(f"dnsmasq executable {binary!r} not found: install "
                                 "dnsmasq-base or set [dnsmasq]binary")
    return found


def render(settings: DnsmasqSettings) -> str:
    """The configuration text for ``settings`` (validated values only), from their template."""
    path = find_template(settings.template)
    # Not HTML: autoescaping would corrupt values; injection is prevented by validating
    # every value in settings.from_conf and by the control-character check below.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(path.parent)), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        autoescape=False)  # noqa: S701
    try:
        text = env.get_template(path.name).render(s=settings, settings=vars(settings))
    except jinja2.TemplateError as exc:
        raise DnsmasqConfigError(f"cannot render {path}: {exc}") from None
    if any(ord(c) < 32 and c not in "\n\t" for c in text):
        raise DnsmasqConfigError(f"{path} produced control characters: refusing to use it")
    return text


def check_file(path: str, text: str, binary: str = "dnsmasq") -> None:
    """Run ``dnsmasq --test`` on ``path`` (holding ``text``); raise :class:`DnsmasqTestFailed`
    with its message and the line it names."""
    command = [find_dnsmasq(binary), "--test", f"--conf-file={path}"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False,
                                timeout=_TEST_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DnsmasqConfigError(f"cannot run {command[0]} --test: {exc}") from None
    # dnsmasq names the temporary file; the reader cares about the line, not that name.
    output = " ".join((result.stderr + result.stdout).replace(path, "the configuration").split())
    if result.returncode != 0:
        found = _LINE.search(output)
        number, lines = int(found[1]) if found else 0, text.splitlines()
        where = f" (line {number}: {lines[number - 1]!r})" if 0 < number <= len(lines) else ""
        raise DnsmasqTestFailed(f"dnsmasq refused the configuration{where}: {output}")


def check(text: str, binary: str = "dnsmasq") -> None:
    """Check configuration ``text`` with ``dnsmasq --test`` from a private temporary file."""
    with tempfile.NamedTemporaryFile("w", prefix="dnsmasq-check-", suffix=".conf") as stream:
        stream.write(text)
        stream.flush()
        check_file(stream.name, text, binary)


def _replace(path: str, data: bytes, mode: int,
             test: Callable[[str], None] = lambda tmp: None) -> bool:
    """Make ``path`` hold ``data`` with ``mode`` (whatever the umask) by ``rename()`` of a
    complete copy that ``test`` accepted; False if it already did. On any failure ``path``
    is left exactly as it was and the error is raised."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        # A dotfile in the same directory, so the final rename() is atomic.
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                   dir=directory)
    except OSError as exc:
        raise DnsmasqConfigError(f"cannot write in {directory}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fchmod(stream.fileno(), mode)
            os.fsync(stream.fileno())
        test(tmp)  # the very bytes that will be installed
        with contextlib.suppress(FileNotFoundError), open(path, "rb") as current:
            if current.read() == data and os.stat(path).st_mode & 0o777 == mode:
                return False
        os.replace(tmp, path)
        tmp = ""
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return True
    except OSError as exc:
        raise DnsmasqConfigError(f"cannot install {path}: {exc.strerror or exc}") from None
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def install(text: str, path: str, binary: str = "dnsmasq") -> bool:
    """Check ``text`` with dnsmasq and atomically make it ``path`` (0644); True if it changed.

    On any failure ``path`` is left exactly as it was and the error is raised.
    """
    return _replace(path, text.encode(), FILE_MODE, lambda tmp: check_file(tmp, text, binary))


def install_lease_script(settings: DnsmasqSettings) -> bool:
    """Write the ``dhcp-script`` that reports leases into its existing report directory
    (mode 0755, atomically); True if it changed. Nothing to do without reports."""
    if not settings.lease_script:  # set only with a report directory
        return False
    data = leases.script(settings.lease_report_dir).encode()
    return _replace(settings.lease_script, data, 0o755)  # dnsmasq execs it
