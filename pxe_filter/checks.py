"""Start-up checks of the daemon: the hostsdir, conflicting options."""

import logging
import os

from pxe_filter.common import statedirs
from pxe_filter.common.config import ConfigError
from pxe_filter.common.lifecycle import ServiceError

LOG = logging.getLogger(__name__)


class FatalError(ServiceError):
    """The daemon cannot continue; the message says what to fix."""


def check_hostsdir(path: str | None) -> str:
    """The absolute hostsdir; raises ConfigError saying what is wrong."""
    if not path:
        raise ConfigError("[pxe_filter]dhcp_hostsdir is not set: set it to the directory "
                          "dnsmasq reads with --dhcp-hostsdir")
    path = os.path.abspath(path)
    if os.path.islink(path):
        raise ConfigError(f"[pxe_filter]dhcp_hostsdir {path} is a symbolic link: set "
                          f"the option to the directory itself "
                          f"({os.path.realpath(path)}), which is never followed "
                          f"through a link")
    # Made when missing (dnsmasq is started after the first sync, so it watches the directory
    # made here); refused when something else has the name.
    statedirs.ensure_dir(path, statedirs.READABLE, "[pxe_filter]dhcp_hostsdir")
    # os.access alone says yes to root on a read-only mount: create and remove a real file.
    probe = os.path.join(path, f".ironic-pxe-filter.probe.{os.getpid()}.tmp")
    try:
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"[pxe_filter]dhcp_hostsdir {path} is not writable "
                          f"({exc.strerror or exc}): give this service's user write "
                          f"access to it, or check that its file system is not "
                          f"mounted read-only") from None
    return path


def warn_conflicts(discovery: bool, deny_unknown: bool) -> None:
    """Warn when the options make auto-discovery impossible."""
    if deny_unknown and discovery:
        LOG.warning("[pxe_filter]deny_unknown_macs and [auto_discovery]enabled are both "
                    "true: unknown machines are refused, so auto-discovery cannot work")
