"""Helpers shared by the inspection service and the PXE filter daemon."""
