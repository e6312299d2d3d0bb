"""ramdisk-error: fail the inspection early with the error the ramdisk reported."""

from inspection.hooks.base import InspectionHook, RamdiskError
from inspection.hooks.context import InspectionContext


class RamdiskErrorHook(InspectionHook):
    """Fail inspection when the ramdisk sent an ``error`` in its data."""

    name = "ramdisk-error"

    def preprocess(self, ctx: InspectionContext) -> None:
        """Raise :class:`RamdiskError` carrying the ramdisk's own message."""
        error = ctx.plugin_data.get("error")
        if error:
            text = error if isinstance(error, str) else repr(error)
            raise RamdiskError(f"Ramdisk reported error: {text}", hook=self.name)

    def __call__(self, ctx: InspectionContext) -> None:
        """Nothing left to do: the check ran in preprocess."""
