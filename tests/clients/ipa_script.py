"""Run ironic-python-agent's inspection against a callback URL, on a described machine.

Run by the clients venv's python, never imported by ours. IPA's own code does the work:
``inspector.inspect()`` runs IPA's ``default`` collector (``hardware.list_hardware_info`` of
IPA's GenericHardwareManager, ``guess_root_disk``, the boot interface from the kernel's BOOTIF)
and posts with ``inspector.call_inspector``. Only the manager's methods that would read real
hardware (NICs, CPUs, disks, memory, lshw, ipmitool) answer from the machine described on stdin:

``{"callback_url": URL, "bootif": MAC | null, "interfaces": [{"name", "mac", "ipv4"}],
"bmc_address": IP | null, "cpu_count": N, "memory_mb": N, "disks": [{"name", "size"}],
"serial": S}``

stdout: ``{"uuid": ... | null, "error": message | null, "sent": the posted payload}``.
"""

import json
import sys

from ironic_python_agent import config, encoding, hardware, inspector, utils
from oslo_config import cfg

CONF = cfg.CONF


class DescribedMachine(hardware.GenericHardwareManager):
    """IPA's generic manager where reading hardware returns the described machine."""

    def __init__(self, machine: dict) -> None:
        super().__init__()
        self.machine = machine

    def initialize(self) -> None:
        """Nothing to probe (the generic one scans iSCSI, md RAID and waits for disks)."""

    def _get_system_lshw_dict(self) -> dict:
        # IPA's own get_system_vendor_info parses this, as it parses `lshw -json`.
        return {"product": "Lab Machine", "vendor": "Lab Vendor",
                "serial": self.machine["serial"],
                "children": [{"id": "core", "children": [{
                    "id": "firmware", "vendor": "Lab BIOS", "version": "1.0",
                    "date": "01/01/2026"}]}]}

    def list_network_interfaces(self) -> list:
        return [hardware.NetworkInterface(i["name"], i["mac"], ipv4_address=i.get("ipv4"),
                                          has_carrier=True, speed_mbps=1000)
                for i in self.machine["interfaces"]]

    def get_cpus(self) -> hardware.CPU:
        return hardware.CPU(model_name="Lab CPU", frequency="2400", architecture="x86_64",
                            count=self.machine["cpu_count"], socket_count=1,
                            flags=["vmx", "lm"])

    def list_block_devices(self, include_partitions: bool = False) -> list:
        return [hardware.BlockDevice(name=d["name"], model="Lab Disk", size=d["size"],
                                     rotational=False, serial="SN-" + d["name"].rsplit("/", 1)[-1])
                for d in self.machine["disks"]]

    def get_memory(self) -> hardware.Memory:
        mb = self.machine["memory_mb"]
        return hardware.Memory(total=mb * 1024 * 1024, physical_mb=mb)

    def get_bmc_address(self) -> str | None:
        return self.machine.get("bmc_address")

    def get_bmc_v6address(self) -> str | None:
        return None

    def get_bmc_mac(self) -> str:
        raise hardware.errors.IncompatibleHardwareMethodError()


def main() -> None:
    machine = json.load(sys.stdin)
    config.populate_config()
    CONF([], project="ironic-python-agent")
    CONF.set_override("inspection_callback_url", machine["callback_url"])
    CONF.set_override("inspection_collectors", "default")
    CONF.set_override("inspection_dhcp_wait_timeout", 0)
    # What the ramdisk reads from the kernel command line (BOOTIF: the PXE NIC).
    params = {"BOOTIF": "01-" + machine["bootif"].replace(":", "-")} if machine.get(
        "bootif") else {}
    utils._set_cached_params(params)
    manager = DescribedMachine(machine)
    hardware._global_managers = [{"name": "DescribedMachine", "manager": manager,
                                  "support": hardware.HardwareSupport.MAINLINE}]

    sent = {}
    original = inspector.call_inspector

    def call_inspector(data, failures):
        try:
            return original(data, failures)
        finally:  # data now holds what was posted (call_inspector adds "error")
            sent.update(json.loads(encoding.RESTJSONEncoder().encode(data)))

    inspector.call_inspector = call_inspector
    try:
        uuid = inspector.inspect()
        error = None
    except Exception as exc:  # reported to the test: what the ramdisk would log
        uuid, error = None, str(exc)
    json.dump({"uuid": uuid, "error": error, "sent": sent}, sys.stdout)


if __name__ == "__main__":
    main()
