"""BMC work pending for a node, recorded on the node itself so that any worker can do it
and a crash loses nothing.

``driver_internal_info['bmc_task']`` holds the action: ``verify`` (node in ``verifying``:
read the power state), ``boot`` (node in ``inspecting``: boot from the network),
``inspect`` (node in ``inspecting`` with ``inspect_interface = redfish``: read the
inventory from the BMC, out-of-band, without powering anything) or a power
change (with ``target_power_state``; once the BMC accepted it, until when the change may
take). Only nodes with such a task are touched: a database shared with Ironic has nodes in
the same states that Ironic's conductors drive.
"""

import time
from typing import Any

from oslo_config import cfg

from inspection.db.models import Node
from inspection.errors import BadRequest
from inspection.power import drivers

#: driver_internal_info keys: Ironic's flag that it manages the node's boot, whether to
#: power off when the inspection ends ([inspector]power_off when it started), the task.
MANAGED_KEY = "inspector_manage_boot"
POWER_OFF_KEY = "inspection_power_off"
TASK_KEY = "bmc_task"
#: Tasks that go with a provision state rather than a power change.
VERIFY, BOOT, INSPECT = "verify", "boot", "inspect"
_STEP_STATES = {VERIFY: "verifying", BOOT: "inspecting", INSPECT: "inspecting"}
#: Inspect interfaces that read the hardware from the BMC instead of booting a ramdisk.
OUT_OF_BAND = ("redfish",)


def manages_boot(node: Node) -> bool:
    """Whether this service drives ``node``'s BMC."""
    return drivers.manages_boot(node.driver, node.driver_info)


def _set_info(node: Node, **changes: Any) -> None:
    info = dict(node.driver_internal_info or {})
    for key, value in changes.items():
        if value is None:
            info.pop(key, None)
        else:
            info[key] = value
    node.driver_internal_info = info


def out_of_band(node: Node) -> bool:
    """Whether ``node`` is inspected from its BMC (``inspect_interface = redfish``)."""
    return node.inspect_interface in OUT_OF_BAND


def out_of_band_problem(node: Node) -> str | None:
    """Why ``node`` cannot be inspected out-of-band (None: it can)."""
    missing = drivers.missing_info(node.driver, node.driver_info)
    if node.driver == "redfish" and not missing:
        return None
    return (f"inspect_interface {node.inspect_interface} needs the redfish hardware type with "
            f"redfish_address in driver_info (driver {node.driver!r}"
            f"{', lacking ' + ', '.join(missing) if missing else ''})")


def start_inspection(node: Node, conf: cfg.ConfigOpts) -> bool:
    """Mark a node whose boot is managed, or that is inspected out-of-band (before
    ``inspecting``); False if neither."""
    if out_of_band(node):
        problem = out_of_band_problem(node)
        if problem:
            raise BadRequest(f"Node {node.uuid} cannot be inspected out-of-band: {problem}")
        # Nothing is powered or booted, so nothing is powered off at the end.
        _set_info(node, **{MANAGED_KEY: None, POWER_OFF_KEY: None,
                           TASK_KEY: {"action": INSPECT}})
        return True
    if not manages_boot(node):
        _set_info(node, **{MANAGED_KEY: None, POWER_OFF_KEY: None})
        return False
    _set_info(node, **{MANAGED_KEY: True, POWER_OFF_KEY: bool(conf.inspector.power_off),
                       TASK_KEY: {"action": BOOT}})
    return True


def start_verification(node: Node) -> None:
    """Have the BMC actor read the power state of a node going to ``verifying``."""
    _set_info(node, **{TASK_KEY: {"action": VERIFY}})


def end_inspection(node: Node) -> None:
    """The inspection ended (processed, failed, aborted, timed out): power off a machine
    this service booted, unless [inspector]power_off was false (reboot if the node has
    ``disable_power_off``, as Ironic does)."""
    info = node.driver_internal_info or {}
    managed, power_off = info.get(MANAGED_KEY), info.get(POWER_OFF_KEY)
    _set_info(node, **{MANAGED_KEY: None, POWER_OFF_KEY: None})
    if managed and power_off and manages_boot(node):
        request(node, drivers.REBOOT if node.disable_power_off else drivers.POWER_OFF)


def request(node: Node, action: str, timeout: int | None = None) -> None:
    """Ask for a power change (replacing any pending one); the actor sends it. ``timeout``:
    seconds the machine has to obey (default [bmc]power_state_change_timeout)."""
    node.target_power_state = drivers.END_STATE[action]
    task: dict[str, Any] = {"action": action}
    if timeout is not None:
        task["timeout"] = timeout
    _set_info(node, **{TASK_KEY: task})


def pending(node: Node) -> dict | None:
    """The node's task, or None (junk written by others counts as none)."""
    task = (node.driver_internal_info or {}).get(TASK_KEY)
    if not isinstance(task, dict):
        return None
    action = task.get("action")
    if action in _STEP_STATES:
        return task if node.provision_state == _STEP_STATES[action] else None
    return task if action in drivers.POWER_TARGETS else None


def sent(node: Node, action: str, timeout: float, interval: float) -> None:
    """The BMC accepted ``action``: check the state until ``timeout`` seconds from now
    (or the task's own timeout)."""
    now = time.time()
    timeout = float((pending(node) or {}).get("timeout") or timeout)
    node.target_power_state = drivers.END_STATE[action]
    _set_info(node, **{TASK_KEY: {"action": action, "deadline": now + timeout,
                                  "next": now + interval}})


def finish(node: Node, power_state: str | None) -> None:
    """No power change pending any more; ``power_state`` as last read (None: unknown)."""
    if power_state is not None:
        node.power_state = power_state
    node.target_power_state = None
    _set_info(node, **{TASK_KEY: None})


def step_done(node: Node) -> None:
    """A verification or a boot is over (the boot may leave a power change to confirm)."""
    task = pending(node)
    if task is not None and task["action"] in _STEP_STATES:
        _set_info(node, **{TASK_KEY: None})


def due(node: Node, now: float | None = None) -> bool:
    """Whether the node has BMC work of this service to do now."""
    task = pending(node)
    if task is None:
        return False
    return float(task.get("next") or 0) <= (now if now is not None else time.time())
