"""extra-hardware: python-hardware's ``data`` (a list of 4-item lists) into ``extra``.

``[["disk", "sda", "size", "100"], ...]`` becomes ``{"disk": {"sda": {"size": 100}}}`` in
``plugin_data['extra']`` (integers converted) and ``data`` is removed. Malformed items are
skipped with a warning, or fail the inspection with ``[inspector]extra_hardware_strict``.
"""

import logging
from typing import Any

from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)


def _valid_item(item: Any) -> bool:
    return (isinstance(item, list) and len(item) == 4
            and all(isinstance(part, str) for part in item[:3]))


def _value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value


class ExtraHardwareHook(InspectionHook):
    """Convert hardware-detect data into a nested dictionary for rules."""

    name = "extra-hardware"

    def __call__(self, ctx: InspectionContext) -> None:
        """Replace ``plugin_data['data']`` by ``plugin_data['extra']``."""
        strict = self.conf.inspector.extra_hardware_strict
        if "data" not in ctx.plugin_data:
            LOG.warning("No extra hardware data from the ramdisk of node %s", ctx.node_ident)
            return
        data = ctx.plugin_data["data"]
        if not isinstance(data, list):
            if strict:
                raise self.fail(f"extra hardware data must be a list, got "
                                f"{type(data).__name__}")
            LOG.warning("Node %s: extra hardware data is not a list; left unconverted",
                        ctx.node_ident)
            return
        bad = [item for item in data if not _valid_item(item)]
        if bad and strict:
            raise self.fail(f"{len(bad)} extra hardware item(s) are not lists of 4 values "
                            f"with 3 string keys, e.g. {bad[0]!r:.100}")
        for item in bad[:10]:
            LOG.warning("Node %s: ignoring malformed extra hardware item %.100r",
                        ctx.node_ident, item)
        extra: dict[str, dict] = {}
        for item in data:
            if _valid_item(item):
                extra.setdefault(item[0], {}).setdefault(item[1], {})[item[2]] = _value(item[3])
        ctx.plugin_data["extra"] = extra
        del ctx.plugin_data["data"]
