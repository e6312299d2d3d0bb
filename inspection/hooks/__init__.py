"""Inspection hooks: one module per hook, found through the ``inspection.hooks`` entry points.

See :mod:`inspection.hooks.base` for the interface the pipeline uses.
"""
