"""The status the daemon records (a JSON file) and the ``ironic-pxe-filter status`` command."""
