"""The dnsmasq that serves inspection PXE: its options, configuration rendering and checks.

Entry points for the daemon: :func:`render_and_install` (render ``[dnsmasq]``, check it with
``dnsmasq --test``, install it atomically; True when the file changed so dnsmasq needs a
reload) and :class:`DnsmasqConfigError` (the old file is kept; the message says what to fix).
"""

from pxe_filter.dnsmasq.config import (
    DnsmasqTestFailed,
    check,
    install,
    render,
    render_and_install,
    render_conf,
)
from pxe_filter.dnsmasq.options import list_opts, register_opts
from pxe_filter.dnsmasq.settings import DnsmasqConfigError, DnsmasqSettings, InvalidSettings

__all__ = [
    "DnsmasqConfigError",
    "DnsmasqSettings",
    "DnsmasqTestFailed",
    "InvalidSettings",
    "check",
    "install",
    "list_opts",
    "register_opts",
    "render",
    "render_and_install",
    "render_conf",
]
