"""The one exception sub-commands raise to fail in one line."""


class CommandError(Exception):
    """A failure to report in one line on stderr (exit status 1)."""
