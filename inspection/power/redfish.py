"""The ``redfish`` hardware type's BMC client, on sushy (as Ironic's redfish driver).

driver_info keys are Ironic's: ``redfish_address`` (a URL, or a host that means https),
``redfish_system_id`` (the system's path such as ``/redfish/v1/Systems/1``, or its bare
id; optional when the BMC has a single system), ``redfish_username``,
``redfish_password`` and ``redfish_verify_ca`` (true, false or a CA bundle path).
"""

import contextlib
from collections.abc import Mapping

import requests
import sushy
from oslo_utils import strutils
from sushy import auth as sushy_auth
from sushy import exceptions as sushy_exc

from inspection.power import drivers
from inspection.power.errors import BmcError
from inspection.power.redfish_inventory import Reading, read_inventory
from inspection.power.redfish_resources import MissingResource

_TARGETS = {
    drivers.POWER_ON: sushy.RESET_ON,
    drivers.POWER_OFF: sushy.RESET_FORCE_OFF,
    drivers.REBOOT: sushy.RESET_FORCE_RESTART,
    drivers.SOFT_REBOOT: sushy.RESET_GRACEFUL_RESTART,
    drivers.SOFT_POWER_OFF: sushy.RESET_GRACEFUL_SHUTDOWN,
}
_DEVICES = {drivers.PXE: sushy.BOOT_SOURCE_TARGET_PXE,
            drivers.UEFI_HTTP: sushy.BOOT_SOURCE_TARGET_UEFI_HTTP}
_MODES = {"uefi": sushy.BOOT_SOURCE_MODE_UEFI, "bios": sushy.BOOT_SOURCE_MODE_BIOS}


def _address(value: str) -> str:
    return value.rstrip("/") if "://" in value else f"https://{value}"


def _verify(value: object) -> bool | str:
    if value is None or isinstance(value, bool):
        return True if value is None else value
    text = str(value)
    try:
        return strutils.bool_from_string(text, strict=True)
    except ValueError:
        return text  # a CA bundle


def translate(exc: Exception, address: str) -> BmcError:
    """A :class:`BmcError` naming what went wrong with the BMC at ``address``."""
    where = f"Redfish BMC {address}"
    if isinstance(exc, sushy_exc.AccessError):
        return BmcError(f"{where} refused the credentials (HTTP {exc.status_code}): check "
                        f"redfish_username and redfish_password", retryable=False,
                        kind="auth")
    if isinstance(exc, sushy_exc.ResourceNotFoundError):
        return BmcError(f"{where} has no such system: check redfish_system_id",
                        retryable=False, kind="invalid")
    if isinstance(exc, sushy_exc.HTTPError):
        return BmcError(f"{where} answered HTTP {exc.status_code}: {exc.message}"[:500],
                        retryable=exc.status_code >= 500)
    if isinstance(exc, sushy_exc.ConnectionError):
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, requests.Timeout):
            return BmcError(f"{where} did not answer in time", kind="timeout")
        return BmcError(f"cannot connect to {where}", kind="unreachable")
    if isinstance(exc, requests.Timeout):
        return BmcError(f"{where} did not answer in time", kind="timeout")
    if isinstance(exc, requests.RequestException):
        return BmcError(f"cannot connect to {where}", kind="unreachable")
    return BmcError(f"{where}: {type(exc).__name__}: {exc}"[:500])


class RedfishClient:
    """A Redfish connection to one system (HTTP basic authentication, no Redfish session
    left behind on the BMC)."""

    def __init__(self, info: Mapping, timeout: float) -> None:
        self.address = _address(str(info["redfish_address"]))
        try:
            conn = sushy.Sushy(
                self.address, verify=_verify(info.get("redfish_verify_ca")),
                auth=sushy_auth.BasicAuth(info.get("redfish_username"),
                                          info.get("redfish_password")),
                # One attempt per call: the session pool retries, with its own backoff
                # (sushy counts 0 as its default of 3 attempts).
                server_side_retries=1, server_side_retries_delay=0.01,
                read_timeout=timeout, connect_timeout=timeout)
            system_id = info.get("redfish_system_id")
            if system_id and not str(system_id).startswith("/"):
                system_id = f"/redfish/v1/Systems/{system_id}"  # a bare id, not Ironic's path
            self.system = conn.get_system(system_id) if system_id else conn.get_system()
        except Exception as exc:
            raise translate(exc, self.address) from None
        self.conn = conn

    def _call(self, func, *args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            raise translate(exc, self.address) from None

    def power_state(self) -> str:
        """The system's power state (read when the session opened: one session per call)."""
        state = self.system.power_state
        # As Ironic maps them: a machine powering on counts as on.
        return drivers.POWER_ON if state in (sushy.POWER_STATE_ON,
                                             sushy.POWER_STATE_POWERING_ON) \
            else drivers.POWER_OFF

    def set_power(self, target: str) -> None:
        """Send the reset action for ``target``."""
        self._call(self.system.reset_system, _TARGETS[target])

    def set_boot_once(self, device: str, boot_mode: str | None) -> None:
        """Boot once from the network device, in ``boot_mode`` if the node names one."""
        self._call(self.system.set_system_boot_options, _DEVICES[device],
                   enabled=sushy.BOOT_SOURCE_ENABLED_ONCE, mode=_MODES.get(boot_mode or ""))

    def inventory(self) -> Reading:
        """Read the system's hardware (GET requests only); :class:`BmcError` names what
        failed. A linked resource the BMC does not serve leaves its part absent."""
        return read_inventory(self._get_json, dict(self.system.json or {}), self.address)

    def _get_json(self, path: str) -> dict:
        try:
            return self.system._conn.get(path=path).json()
        except sushy_exc.HTTPError as exc:
            # 404, or 501 Not Implemented: what many BMCs answer for a feature they lack.
            if exc.status_code in (404, 501):
                raise MissingResource(path) from None
            raise translate(exc, self.address) from None
        except ValueError:
            raise BmcError(f"Redfish BMC {self.address} answered {path[:200]} with no valid "
                           f"JSON", retryable=False, kind="invalid") from None
        except Exception as exc:
            raise translate(exc, self.address) from None

    def close(self) -> None:
        """Close the HTTP connections."""
        with contextlib.suppress(Exception):  # nothing to do about a failed close
            self.conn._conn.close()
