"""The exceptions sub-commands raise to fail in one line."""


class CommandError(Exception):
    """A failure to report in one line on stderr (exit status 1)."""

    exit_code = 1


class UsageError(CommandError):
    """The command line itself is wrong, in a way argparse cannot see (exit status 2)."""

    exit_code = 2
