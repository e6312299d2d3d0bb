"""ramdisk-error: fail the inspection early with the error the ramdisk reported."""

import json

from inspection.common.secret_text import mask_text
from inspection.hooks.base import InspectionHook, RamdiskError
from inspection.hooks.context import InspectionContext

#: The longest ramdisk error text read: last_error keeps 4 kB, masking scans what is read.
MAX_ERROR_TEXT = 8192


class RamdiskErrorHook(InspectionHook):
    """Fail inspection when the ramdisk sent an ``error`` in its data."""

    name = "ramdisk-error"

    def preprocess(self, ctx: InspectionContext) -> None:
        """Raise :class:`RamdiskError` carrying the ramdisk's own message, secrets masked
        (it is stored in last_error and logged)."""
        error = ctx.plugin_data.get("error")
        if error:
            text = error if isinstance(error, str) else json.dumps(error, default=str)
            raise RamdiskError(f"Ramdisk reported error: {mask_text(text[:MAX_ERROR_TEXT])}",
                               hook=self.name)

    def __call__(self, ctx: InspectionContext) -> None:
        """Nothing left to do: the check ran in preprocess."""
