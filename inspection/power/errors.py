"""The error every BMC client raises: a reason safe to store in ``last_error``."""


class BmcError(Exception):
    """A BMC request failed; ``str()`` names the problem and never a password.

    ``retryable`` is False when repeating the request cannot help (refused credentials,
    missing driver_info, an unsupported action).
    """

    def __init__(self, reason: str, retryable: bool = True, kind: str = "error") -> None:
        super().__init__(reason)
        self.retryable = retryable
        #: The metrics label: auth, unreachable, timeout, invalid, unsupported or error.
        self.kind = kind
