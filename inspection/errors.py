"""Errors of the inspection service that an HTTP API maps to status codes.

Each carries ``code`` (the HTTP status) and a message safe to show to any client: messages of
errors raised for the unauthenticated ramdisk callback never say which node exists; the
reason goes to the logs instead.
"""


class InspectionServiceError(Exception):
    """Base class: ``code`` is the HTTP status an API returns for it."""

    code = 500


class BadRequest(InspectionServiceError):
    """The request itself is unusable (e.g. nothing to look a node up by)."""

    code = 400


class NotFound(InspectionServiceError):
    """No usable node; the message is generic, ``reason`` is for logs only."""

    code = 404
    generic_message = "The requested node could not be found"

    def __init__(self, reason: str = "", message: str | None = None) -> None:
        super().__init__(message or self.generic_message)
        self.reason = reason


class UnknownMachine(NotFound):
    """No node at all matches the data (as opposed to a wrong state or a conflict).

    Only this outcome may lead to auto-discovery.
    """


class NodeLocked(InspectionServiceError):
    """Another process (this service or an Ironic conductor) holds the node's reservation."""

    code = 409

    def __init__(self, node_id: int | None = None, holder: str | None = None) -> None:
        super().__init__("The node is being processed by another service; try again later")
        self.node_id = node_id
        self.holder = holder


class ReservationLost(NodeLocked):
    """The node's reservation was taken away before the change could commit: nothing was
    changed, and the client may try again."""

    def __init__(self, node_id: int | None = None) -> None:
        super().__init__(node_id)
        self.args = ("The node's reservation was taken over while changing it; nothing was "
                     "changed, try again",)


class InvalidState(InspectionServiceError):
    """The requested action is not possible in the node's current provision state."""

    code = 409


class Overloaded(InspectionServiceError):
    """The service cannot take more work now; the client should retry after a while."""

    code = 503

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(retry_after)}
