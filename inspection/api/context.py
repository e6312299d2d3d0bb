"""What every request handler needs: configuration, database, rules, processing."""

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from flask import current_app, request
from oslo_config import cfg
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from inspection import process_identity
from inspection.api.errors import ApiError
from inspection.common.untrusted import find_unstorable
from inspection.db.engine import session_scope
from inspection.rules import RuleRepository, RulesEngine
from pxe_filter.broadcast import FilterNotifier

EXTENSION = "ironic_inspection"


@dataclass
class ApiContext:
    """Objects shared by the handlers of one app (created once by ``create_app``)."""

    conf: cfg.ConfigOpts
    engine: Engine
    sessions: sessionmaker
    rules: RuleRepository
    rules_engine: RulesEngine
    notifier: FilterNotifier
    service: Any
    dispatcher: Any

    @property
    def owner(self) -> str:
        """This process's identity in node reservations (:mod:`inspection.process_identity`)."""
        return process_identity.of(self.conf)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed at the end of the block (rolled back on error)."""
        with session_scope(self.sessions) as session:
            yield session

    def node_id(self, ident: str) -> int:
        """The id of the node a request names (UUID or name, ``.json`` as Ironic allows up to
        1.90); :class:`inspection.errors.NotFound` otherwise."""
        # nodes_query needs the API version, which needs this module: imported late
        from inspection.api.nodes_query import find_node  # noqa: PLC0415

        with self.session() as session:
            return find_node(session, ident).id


def ctx() -> ApiContext:
    """The context of the current app."""
    return current_app.extensions[EXTENSION]


def _reject_constant(name: str) -> Any:
    raise ApiError(400, f"The request body is not valid JSON: {name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ApiError(400, f"The request body holds a number out of range: {text[:40]}")
    return value


def json_body(required: bool = True, check_strings: bool = True) -> Any:
    """The request body parsed as JSON; ApiError 400 with a clear message otherwise.

    Beyond syntax, refuses what JSON does not allow but Python's parser accepts (NaN,
    Infinity, numbers that overflow to infinity), what would crash the parser or the
    handler (integers of thousands of digits, very deep nesting), and strings no
    database can store (NUL, unpaired surrogates) unless ``check_strings`` is false: the
    ramdisk's data goes to JSON columns, where they are stored escaped.
    """
    raw = request.get_data(cache=True)  # raises 413 beyond MAX_CONTENT_LENGTH
    if not raw.strip():
        if required:
            raise ApiError(400, "The request body must be a JSON document")
        return None
    try:
        body = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
    except UnicodeDecodeError:
        raise ApiError(400, "The request body is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"The request body is not valid JSON: {exc.msg} at line "
                            f"{exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise ApiError(400, "The request body is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer beyond Python's 4300-digit conversion limit
        raise ApiError(400, f"The request body holds a value that cannot be read: "
                            f"{str(exc)[:100]}") from None
    problem = find_unstorable(body, strings=check_strings)
    if problem:
        raise ApiError(400, f"The request body {problem}")
    return body


def json_object() -> dict:
    """The request body, which must be a JSON object."""
    body = json_body()
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object")
    return body


#: Ironic's spellings of booleans in query strings and request bodies.
TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})
FALSE = frozenset({"0", "f", "false", "off", "n", "no"})
ACCEPTED_BOOLEANS = ", ".join(f"'{v}'" for v in sorted(TRUE | FALSE))


def to_bool(name: str, value: object) -> bool:
    """``value`` as a boolean the way Ironic coerces it ("false" is False); 400 otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
        return value.strip().lower() in TRUE
    raise ApiError(400, f"Invalid {name}: Unrecognized value {str(value)[:64]!r}, acceptable "
                        f"values are: {ACCEPTED_BOOLEANS}")
