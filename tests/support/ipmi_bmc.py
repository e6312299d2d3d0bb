"""A real IPMI v2 BMC for tests, built on pyghmi's ``pyghmi.ipmi.bmc.Bmc`` (as virtualbmc is).

Run as ``python -m tests.support.ipmi_bmc --port P --user U --password W --state FILE``: it
serves RMCP+ on 127.0.0.1:P and keeps the machine's power state and boot device in FILE
(JSON, rewritten atomically), which tests read. A ``reset`` while off powers on, as
chassis control does on real machines.
"""

import argparse
import json
import os
import sys
from pathlib import Path

from pyghmi.ipmi import bmc
from pyghmi.ipmi.private import serversession

#: RMCP+ status "invalid authentication algorithm" (IPMI 2.0 table 13-15).
_INVALID_AUTH_ALGORITHM = 0x11
_sha1_only_response = serversession.ServerSession.create_open_session_response


def _open_session_response(self, request: bytearray) -> bytearray:
    # pyghmi's server speaks cipher suite 3 (SHA-1) only, yet accepts a client's SHA-256
    # proposal, and pyghmi's client proposes SHA-256 first. Refusing it, as a real SHA-1-only
    # BMC does, makes the client fall back to suite 3.
    if len(request) > 12 and request[12] == 3:
        self.clientsessionid = request[4:8]
        return bytearray([request[0], _INVALID_AUTH_ALGORITHM, 0, 0]) + request[4:8]
    return _sha1_only_response(self, request)


serversession.ServerSession.create_open_session_response = _open_session_response


class FileBmc(bmc.Bmc):
    """A BMC whose machine is a JSON file: ``{"power": "on"|"off", "boot": device}``."""

    def __init__(self, authdata: dict, port: int, state: Path) -> None:
        super().__init__(authdata, port=port, address="127.0.0.1")
        self.state_path = state
        self.state = json.loads(state.read_text()) if state.exists() else \
            {"power": "off", "boot": "default", "log": []}
        self._save("started")

    def _save(self, event: str) -> None:
        self.state["log"].append(event)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.state_path)

    def get_power_state(self) -> str:
        return self.state["power"]

    def _power(self, state: str, event: str) -> None:
        self.state["power"] = state
        self._save(event)

    def power_on(self) -> None:
        self._power("on", "on")

    def power_off(self) -> None:
        self._power("off", "off")

    def power_shutdown(self) -> None:
        self._power("off", "shutdown")

    def power_reset(self) -> None:
        self._power("on", "reset")

    def power_cycle(self) -> None:
        self._power("on", "cycle")

    def get_boot_device(self) -> str:
        return self.state["boot"]

    def set_boot_device(self, bootdevice: str) -> None:
        self.state["boot"] = bootdevice
        self._save(f"boot {bootdevice}")


def main(argv: list[str] | None = None) -> int:
    """Serve until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    server = FileBmc({args.user: args.password}, args.port, args.state)
    print("listening", flush=True)
    server.listen()
    return 0


if __name__ == "__main__":
    sys.exit(main())
