"""Inspection service: ramdisk callback, lookup, discovery, hooks and rules."""
