"""Ironic's error body for every failure, never HTML or a traceback.

``{"error_message": "<JSON text>"}`` where the text holds ``faultstring`` (the message),
``faultcode`` (``Client`` or ``Server``) and ``debuginfo`` (always null), plus ``problems``
for invalid rules and nodes: python-ironicclient and openstacksdk print ``faultstring``.
"""

import json
import logging
from typing import Any

import sqlalchemy as sa
from flask import Flask, Response
from werkzeug.exceptions import HTTPException

from inspection.common.secret_text import mask_text
from inspection.db import retry
from inspection.errors import InspectionServiceError
from inspection.rules.errors import (
    BuiltInRuleError,
    RuleConflict,
    RuleNotFound,
    RuleValidationError,
)
from pxe_filter.common.database import error_reason

LOG = logging.getLogger("inspection.api")


class ApiError(Exception):
    """An error answered with ``code`` and a message safe for the client."""

    def __init__(self, code: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra


def error_body(code: int, message: str, **extra: Any) -> str:
    """Ironic's error body (JSON text) for ``code`` and ``message``."""
    fault = {"faultstring": message, "faultcode": "Client" if code < 500 else "Server",
             "debuginfo": None, **extra}
    return json.dumps({"error_message": json.dumps(fault)})


def integrity_error(exc: sa.exc.IntegrityError, conflict: str, what: str) -> ApiError:
    """409 ``conflict`` for a duplicate; 400 for any other constraint the database holds
    (a CHECK of a shared Ironic schema, NOT NULL), named without the row's values."""
    if retry.is_unique_violation(exc):
        return ApiError(409, conflict)
    diag = getattr(exc.orig, "diag", None)
    name = getattr(diag, "constraint_name", None)
    return ApiError(400, f"Invalid {what}: the database refused the values (constraint "
                         f"{name or 'CHECK, NOT NULL or foreign key'})")


def json_error(code: int, message: str, headers: dict | None = None,
               **extra: Any) -> Response:
    """A JSON error response in Ironic's shape."""
    response = Response(error_body(code, message, **extra), status=code,
                        mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def http_error(exc: HTTPException) -> Response:
    """An HTTP error of werkzeug (404, 405, 413...) in Ironic's body."""
    # Keep headers such as Allow (405) or WWW-Authenticate, drop werkzeug's HTML body.
    headers = {k: v for k, v in exc.get_response().headers.items()
               if k.lower() not in ("content-type", "content-length")}
    messages = {413: "The request body is too large",
                404: "The resource could not be found",
                405: "The method is not allowed for this resource"}
    code = exc.code or 500
    return json_error(code, messages.get(code) or exc.description or exc.name, headers)


def _service_error(exc: InspectionServiceError) -> Response:
    # The service's errors may quote what a ramdisk or BMC said: never a password in it.
    return json_error(exc.code, mask_text(str(exc)), getattr(exc, "headers", None))


def _api_error(exc: ApiError) -> Response:
    return json_error(exc.code, exc.message, **exc.extra)


def _rule_validation(exc: RuleValidationError) -> Response:
    return json_error(400, str(exc), problems=exc.problems)


def _database_error(exc: sa.exc.SQLAlchemyError) -> Response:
    if retry.is_read_only(exc):
        LOG.error("Request not completed: the database refuses writes (read-only: a standby "
                  "after a failover?): %s. Point [database]connection at the primary",
                  error_reason(exc))
        return json_error(503, "The database is read-only; try again later",
                          {"Retry-After": "60"})
    if not retry.is_transient(exc):
        return _unexpected(exc)
    # A deadlock, a lock timeout, a dropped connection: nothing was committed.
    LOG.warning("Request not completed, the database failed: %s (the client may retry)",
                error_reason(exc))
    return json_error(503, "The database is busy or unreachable; try again later",
                      {"Retry-After": "1"})


def _unexpected(exc: Exception) -> Response:
    LOG.exception("Unexpected error while handling a request")
    return json_error(500, "Internal server error; the service log has the details")


def register(app: Flask) -> None:
    """Install the handlers on ``app``."""
    app.register_error_handler(HTTPException, http_error)
    app.register_error_handler(InspectionServiceError, _service_error)
    app.register_error_handler(ApiError, _api_error)
    app.register_error_handler(RuleValidationError, _rule_validation)
    app.register_error_handler(RuleNotFound, lambda e: json_error(404, str(e)))
    app.register_error_handler(RuleConflict, lambda e: json_error(409, str(e)))
    app.register_error_handler(BuiltInRuleError, lambda e: json_error(400, str(e)))
    app.register_error_handler(sa.exc.SQLAlchemyError, _database_error)
    app.register_error_handler(Exception, _unexpected)
