"""root-device: pick the root disk by the node's root device hints and set ``local_gb``.

With ``properties.root_device`` hints, the first inventory disk matching all of them is the
root disk (no match fails the inspection); disks matching any hint in
``properties.skip_block_devices`` are never chosen. Without hints, the ramdisk's own choice
(``plugin_data['root_disk']``) is used, else IPA's default: the smallest disk of at least
4 GiB. ``local_gb`` is the root disk size in whole GiB, 1 less when
``[inspector]disk_partitioning_spacing`` is set; 0 means diskless. ``plugin_data`` gets
``root_disk`` and ``local_gb``.
"""

import logging

from inspection.common.untrusted import for_log
from inspection.hooks import inventory as inv
from inspection.hooks import root_hints
from inspection.hooks.base import InspectionHook
from inspection.hooks.context import InspectionContext

LOG = logging.getLogger(__name__)
_MIN_DEFAULT_ROOT = 4 * root_hints.GIB


def _size(disk: dict) -> int | None:
    size = disk.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None


class RootDeviceHook(InspectionHook):
    """Select the root disk and compute the node's local_gb."""

    name = "root-device"

    def __call__(self, ctx: InspectionContext) -> None:
        """Set ``local_gb`` (and plugin_data ``root_disk``/``local_gb``)."""
        disks = []
        for disk in inv.disks(ctx.inventory) or []:
            if _size(disk) is None:
                LOG.warning("Node %s: ignoring disk %s with a missing or malformed size %.40r",
                            ctx.node_ident, for_log(disk.get("name")), disk.get("size"))
            else:
                disks.append(disk)
        props = ctx.node.properties or {}
        hints = props.get("root_device")
        if hints:
            root = self._by_hints(ctx, disks, hints, props.get("skip_block_devices"))
        elif isinstance(ctx.plugin_data.get("root_disk"), dict):
            root = ctx.plugin_data["root_disk"]
        else:
            candidates = [d for d in disks if (_size(d) or 0) >= _MIN_DEFAULT_ROOT]
            root = min(candidates, key=_size, default=None)
        local_gb = 0
        if root is None:
            LOG.info("No root disk for node %s: assuming it is diskless", ctx.node_ident)
        else:
            size = _size(root)
            if size is None:
                raise self.fail(f"root disk {root.get('name')!r} has a missing or malformed "
                                f"size: {root.get('size')!r:.40}")
            local_gb = size // root_hints.GIB
            if local_gb == 0:
                LOG.warning("Root disk %s of node %s is smaller than 1 GiB",
                            for_log(root.get("name")), ctx.node_ident)
            elif self.conf.inspector.disk_partitioning_spacing:
                local_gb -= 1
            ctx.plugin_data["root_disk"] = root
            LOG.info("Root disk of node %s: %s, local_gb %d", ctx.node_ident,
                     for_log(root.get("name")), local_gb)
        ctx.plugin_data["local_gb"] = local_gb
        ctx.edit.set_property("local_gb", local_gb)

    def _by_hints(self, ctx: InspectionContext, disks: list[dict], hints: object,
                  skip: object) -> dict:
        try:
            skipped: set[int] = set()
            if skip:
                if not isinstance(skip, list):
                    raise root_hints.HintError("skip_block_devices must be a list of hints")
                for skip_hints in skip:
                    for disk in root_hints.find_devices(disks, skip_hints):
                        LOG.info("Node %s: skipping disk %s (skip_block_devices)",
                                 ctx.node_ident, for_log(disk.get("name")))
                        skipped.add(id(disk))
            usable = [d for d in disks if id(d) not in skipped]
            root = root_hints.match_root_device(usable, hints)
        except root_hints.HintError as exc:
            raise self.fail(f"invalid root device hints in the node's properties: "
                            f"{exc}") from None
        if root is None:
            raise self.fail(f"no disk satisfies the root device hints {hints!r:.200} "
                            f"(disks: {', '.join(str(d.get('name')) for d in disks) or 'none'})")
        return root
