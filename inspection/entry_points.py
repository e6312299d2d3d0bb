"""Console scripts of the inspection service, which needs the ``[inspection]`` extra.

A filter-only install (``pip install ironic-pxe-filter``) has these commands too; without the
extra they say what to install instead of failing with an import traceback.
"""

import importlib
import importlib.util
import os
import sys

#: Modules of the [inspection] extra that the services import at start.
_NEEDED = ("flask", "waitress", "alembic", "oslo_policy", "keystonemiddleware", "sushy",
           "pyghmi", "yaml", "jsonschema", "jsonpatch")


def _run(module: str) -> int:
    missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        prog = os.path.basename(sys.argv[0]) or "ironic-inspection"
        print(f"{prog}: the inspection service needs the [inspection] extra (missing: "
              f"{', '.join(missing)}): pip install 'ironic-pxe-filter[inspection]'",
              file=sys.stderr)
        return 2
    return importlib.import_module(module).main()


def cli() -> int:
    """``ironic-inspection``."""
    return _run("inspection.cli")


def api() -> int:
    """``ironic-inspection-api``."""
    return _run("inspection.api.cmd")


def worker() -> int:
    """``ironic-inspection-worker``."""
    return _run("inspection.worker.cmd")
