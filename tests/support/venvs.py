"""Third-party software from the package index, each in a venv of its own, for tests.

The judges of compatibility (Ironic 39, python-ironicclient, openstacksdk, IPA) must never share
our venv: their pins would decide our dependencies. Each venv is created on first use under
``.venvs/<name>`` at the repository root (or ``$THIRDPARTY_VENV_DIR/<name>``), with a stamp
naming what was installed, so later sessions reuse it.
"""

import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support import services

ROOT = Path(__file__).resolve().parents[2]

#: Ironic's release that the project measures itself against and tests beside.
IRONIC = ("ironic==39.*", "psycopg2-binary", "PyMySQL")
#: The clients operators use, and the ramdisk agent.
CLIENTS = ("python-ironicclient", "python-openstackclient", "openstacksdk",
           "ironic-python-agent")

#: The Redfish BMC emulator (``sushy-emulator --fake`` needs no libvirt).
SUSHY_TOOLS = ("sushy-tools",)
#: The identity service of an OpenStack cloud, served by a WSGI server of its venv.
KEYSTONE = ("keystone==30.*", "waitress")
#: Ironic's own API tests: tempest and its Bare Metal plugin, at the releases we are judged by.
TEMPEST = ("tempest==47.0.0", "ironic-tempest-plugin==3.2.0")

#: Installing Ironic with its dependencies takes a few minutes on two cores.
INSTALL_TIMEOUT = 1200


def venv_dir(name: str) -> Path:
    """Where the venv ``name`` lives (it may not exist yet)."""
    base = os.environ.get("THIRDPARTY_VENV_DIR")
    return (Path(base) if base else ROOT / ".venvs") / name


def ensure_venv(name: str, requirements: Sequence[str]) -> Path:
    """The venv ``name`` with ``requirements`` installed (created when missing); its bin dir.

    Fails the test in CI, and skips it elsewhere, when the package index cannot be reached.
    """
    path = venv_dir(name)
    stamp = path / (".installed-" + hashlib.sha1("\n".join(requirements).encode())
                    .hexdigest()[:12])
    if stamp.exists():
        return path / "bin"
    try:
        if not (path / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(path)], check=True,
                           capture_output=True, timeout=120)
        subprocess.run([str(path / "bin" / "pip"), "install", "--quiet", *requirements],
                       check=True, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except subprocess.CalledProcessError as exc:
        services.unavailable(f"venv {name} ({' '.join(requirements)})",
                             (exc.stderr or "").strip()[-2000:] or exc)
    except subprocess.TimeoutExpired as exc:
        services.unavailable(f"venv {name}", f"installing took over {exc.timeout} s")
    stamp.touch()
    return path / "bin"
