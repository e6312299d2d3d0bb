"""The ``ipmi`` hardware type's BMC client, on pyghmi (as Ironic's ipmi driver).

driver_info keys are Ironic's: ``ipmi_address``, ``ipmi_port`` (623), ``ipmi_username``
and ``ipmi_password``. IPMI has no UEFI HTTP boot: such nodes need Redfish.
"""

import contextlib
import threading
from collections.abc import Mapping

from pyghmi import exceptions as pyghmi_exc
from pyghmi.ipmi import command
from pyghmi.ipmi.private import session

from inspection.power import drivers
from inspection.power.errors import BmcError

_TARGETS = {drivers.POWER_ON: "on", drivers.POWER_OFF: "off", drivers.REBOOT: "reset",
            drivers.SOFT_REBOOT: "reset", drivers.SOFT_POWER_OFF: "shutdown"}
#: pyghmi's session table is not safe against two logins to one BMC at once (KeyError):
#: logins and logouts to one address and port take turns; other BMCs are not held up.
_BMC_LOCKS: dict[tuple[str, int], threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()
#: pyghmi's words for refused credentials.
_AUTH_WORDS = ("password", "unauthorized", "username", "privilege", "user name")


def _bmc_lock(address: str, port: int) -> threading.Lock:
    with _LOCKS_LOCK:
        return _BMC_LOCKS.setdefault((address, port), threading.Lock())


def _port(value: object) -> int:
    if value in (None, ""):
        return 623
    try:
        port = int(str(value))
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise BmcError(f"ipmi_port {str(value)[:20]!r} is not a port number",
                       retryable=False, kind="invalid")
    return port


def translate(exc: Exception, where: str) -> BmcError:
    """A :class:`BmcError` naming what went wrong with the BMC at ``where``."""
    text = str(exc)
    if text in ("", "None"):  # pyghmi's login gave up on a BMC that never answered
        return BmcError(f"IPMI BMC {where} did not answer in time", kind="timeout")
    lowered = text.lower()
    if any(word in lowered for word in _AUTH_WORDS):
        return BmcError(f"IPMI BMC {where} refused the credentials ({text}): check "
                        f"ipmi_username and ipmi_password", retryable=False, kind="auth")
    if "timeout" in lowered or "timed out" in lowered:
        return BmcError(f"IPMI BMC {where} did not answer in time", kind="timeout")
    if isinstance(exc, OSError):
        return BmcError(f"cannot reach IPMI BMC {where}: {text}", kind="unreachable")
    return BmcError(f"IPMI BMC {where}: {text}"[:500])


class IpmiClient:
    """An IPMI v2 (RMCP+) session to one BMC, logged out on :meth:`close`."""

    def __init__(self, info: Mapping, timeout: float) -> None:
        port = _port(info.get("ipmi_port"))
        self.where = f"{info['ipmi_address']}:{port}"
        address = str(info["ipmi_address"])
        user = str(info.get("ipmi_username") or "")
        password = str(info.get("ipmi_password") or "")
        key = (address, user, password, port, None)
        self._lock = _bmc_lock(address, port)
        # pyghmi gives up on a silent BMC by itself after a few seconds of retransmits.
        with self._lock:
            # A login that failed stays in pyghmi's table and would be handed out again.
            session.Session.initting_sessions.pop(key, None)
            try:
                self.cmd = command.Command(bmc=address, userid=user, password=password,
                                           port=port, keepalive=False)
            except Exception as exc:  # pyghmi raises more than its own exceptions
                session.Session.initting_sessions.pop(key, None)
                raise translate(exc, self.where) from None

    def _call(self, func, *args, **kwargs):
        try:
            result = func(*args, **kwargs)
        except BmcError:
            raise
        except Exception as exc:  # pyghmi raises more than its own exceptions
            raise translate(exc, self.where) from None
        if isinstance(result, dict) and "error" in result:
            raise translate(pyghmi_exc.IpmiException(result["error"]), self.where)
        return result

    def power_state(self) -> str:
        """Read the chassis power state."""
        state = self._call(self.cmd.get_power).get("powerstate")
        return drivers.POWER_ON if state == "on" else drivers.POWER_OFF

    def set_power(self, target: str) -> None:
        """Send the chassis control command for ``target`` (not waiting for it)."""
        self._call(self.cmd.set_power, _TARGETS[target], wait=False)

    def set_boot_once(self, device: str, boot_mode: str | None) -> None:
        """Network boot at the next start (the boot mode only when the node says UEFI)."""
        if device != drivers.PXE:
            raise BmcError("IPMI cannot set UEFI HTTP boot: use the redfish hardware type",
                           retryable=False, kind="unsupported")
        self._call(self.cmd.set_bootdev, "network", persist=False,
                   uefiboot=boot_mode == "uefi")

    def close(self) -> None:
        """Log out, and make pyghmi forget the session."""
        ipmi_session = self.cmd.ipmi_session
        with self._lock:
            with contextlib.suppress(Exception):  # the BMC drops idle sessions by itself
                ipmi_session.logout()
            # pyghmi keeps handing out a logged-out session for the same BMC and
            # credentials (it stays in its table of sessions being set up); the next one
            # must log in afresh.
            table = session.Session.initting_sessions
            for key, value in list(table.items()):
                if value is ipmi_session:
                    table.pop(key, None)
