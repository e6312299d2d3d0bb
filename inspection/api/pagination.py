"""Query parameters of list requests as Ironic reads them: known names only, ``fields``,
``limit``/``marker`` pages with a ``next`` link, ``sort_key``/``sort_dir``.

An unknown parameter is refused (400), never ignored: a client asking for a filter this
service lacks must not receive the unfiltered list as if it were the answer.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import sqlalchemy as sa
from flask import request
from sqlalchemy.orm import Session

from inspection.api.context import ctx, to_bool
from inspection.api.errors import ApiError
from inspection.api.versions import allows, base_url, require_for
from inspection.db.idents import canonical_uuid

PAGE_ARGS = ("limit", "marker", "sort_key", "sort_dir")
#: The versions at which Ironic added ``?fields=`` and ``?detail=``.
FIELDS_MINOR, DETAIL_MINOR = 8, 43


def check_args(allowed: Iterable[str]) -> None:
    """400 naming every query parameter not in ``allowed`` (as Ironic does)."""
    unknown = sorted(set(request.args) - set(allowed))
    if unknown:
        raise ApiError(400, f"Unexpected arguments: {', '.join(unknown)}")
    repeated = sorted(name for name in request.args if len(request.args.getlist(name)) > 1)
    if repeated:
        raise ApiError(400, f"Query parameters given more than once: {', '.join(repeated)}")


def bool_filter(name: str) -> bool | None:
    """A boolean query parameter, or None when absent."""
    value = request.args.get(name)
    return None if value is None else to_bool(name, value)


def uuid_arg(name: str) -> str | None:
    """A query parameter that must be a UUID (canonical form), or None when absent."""
    value = request.args.get(name)
    if value is None:
        return None
    uuid = canonical_uuid(value)
    if uuid is None:
        raise ApiError(400, f"Expected UUID for {name}: {value[:64]}")
    return uuid


def fields_arg(available: Sequence[str], versions: Mapping[str, int] | None = None
               ) -> list[str] | None:
    """The ``fields`` list (comma-separated, each one of ``available``), or None; 406 as
    Ironic answers below 1.8, or for a field newer than the request (``versions``)."""
    value = request.args.get("fields")
    if value is None:
        return None
    require_for(FIELDS_MINOR, "fields")
    fields = [f.strip() for f in value.split(",") if f.strip()]
    for name in fields:
        if name in (versions or {}):
            require_for(versions[name], f"showing the field {name}")
    unknown = [f for f in fields if f not in available]
    if unknown or not fields:
        raise ApiError(400, f"Invalid fields: {', '.join(unknown) or '(none)'}; available: "
                            f"{', '.join(available)}")
    return fields


def detail_and_fields(available: Sequence[str], detail_path: bool = False,
                      versions: Mapping[str, int] | None = None
                      ) -> tuple[bool, list[str] | None]:
    """``detail`` (or a ``/detail`` path) and ``fields``, which Ironic does not combine."""
    detail = bool_filter("detail")
    if detail_path and detail is not None:
        raise ApiError(400, "Unexpected arguments: detail (the /detail path already asks "
                            "for every field)")
    fields = fields_arg(available, versions)
    if detail is not None and not allows(DETAIL_MINOR):  # Ironic's words, and its 400
        raise ApiError(400, f"Invalid query parameter ?detail={detail} received.")
    if fields is not None and (detail or detail_path):
        raise ApiError(400, "Can not specify ?detail=True and fields in the same request.")
    return bool(detail or detail_path), fields


@dataclass(frozen=True)
class Page:
    """How to cut one page out of a sorted list."""

    limit: int
    marker: str | None
    sort_key: str
    sort_dir: str


def page_args(sort_keys: Iterable[str], default_key: str = "id",
              versions: Mapping[str, int] | None = None) -> Page:
    """``limit`` (at most ``[api]max_limit``), ``marker`` (a UUID), ``sort_key``, ``sort_dir``
    (406, as Ironic answers, for a field newer than the request: ``versions``)."""
    max_limit = ctx().conf.api.max_limit
    raw = request.args.get("limit")
    limit = max_limit
    if raw is not None:
        try:
            limit = int(raw)
        except ValueError:
            raise ApiError(400, f"Expected an integer for limit: {raw[:64]}") from None
        if limit <= 0:
            raise ApiError(400, "Limit must be positive")
        limit = min(limit, max_limit)
    sort_dir = request.args.get("sort_dir", "asc")
    if sort_dir not in ("asc", "desc"):
        raise ApiError(400, f"Invalid sort direction: {sort_dir[:64]}. Acceptable values are "
                            f"'asc' or 'desc'")
    sort_key = request.args.get("sort_key", default_key)
    if sort_key in (versions or {}):
        require_for(versions[sort_key], f"sorting by {sort_key}")
    if sort_key not in sort_keys:
        raise ApiError(400, f"The sort_key value {sort_key[:64]!r} is an invalid field for "
                            f"sorting; valid: {', '.join(sorted(sort_keys))}")
    return Page(limit, uuid_arg("marker"), sort_key, sort_dir)


def _sortable(column: sa.ColumnElement) -> sa.ColumnElement:
    """``column`` with NULL replaced by the lowest value of its type, so that every
    backend orders NULLs alike and a marker's position is well defined."""
    kind = column.type
    if isinstance(kind, sa.DateTime):
        return sa.func.coalesce(column, sa.literal(datetime(1970, 1, 1), sa.DateTime()))
    if isinstance(kind, sa.Boolean):
        return sa.func.coalesce(column, sa.false())
    if isinstance(kind, sa.Integer):
        return column
    return sa.func.coalesce(column, "")


def paginate(query: sa.Select, model, page: Page, columns: Mapping[str, sa.ColumnElement],
             marker_row=None) -> sa.Select:
    """``query`` ordered by the sort key (then id), after ``marker_row``, cut to the limit."""
    key = _sortable(columns[page.sort_key])
    descending = page.sort_dir == "desc"
    if marker_row is not None:
        value = sa.select(key).where(model.id == marker_row.id).scalar_subquery()
        after = (key < value) if descending else (key > value)
        same = sa.and_(key == value,
                       (model.id < marker_row.id) if descending else (model.id > marker_row.id))
        query = query.where(sa.or_(after, same))
    order = [key.desc(), model.id.desc()] if descending else [key.asc(), model.id.asc()]
    if page.sort_key == "id":
        order = order[:1]
    return query.order_by(*order).limit(page.limit)


def next_link(count: int, last_uuid: str | None, page: Page, path: str,
              with_sort: bool = True, *, more: bool = False) -> str | None:
    """The URL of the following page when this one is full (as Ironic's ``next``) or
    ``more`` (cut by :func:`fit_page`), with the request's other parameters (filters,
    ``fields``) kept."""
    if not count or (count < page.limit and not more) or last_uuid is None:
        return None
    params = {k: v for k, v in request.args.items() if k not in PAGE_ARGS}
    params.update(limit=page.limit, marker=last_uuid)
    if with_sort:
        params.update(sort_key=page.sort_key, sort_dir=page.sort_dir)
    return f"{base_url()}{path}?{urlencode(params, safe=',:')}"


def _text(column: sa.ColumnElement) -> bool:
    kind = column.type
    return isinstance(getattr(kind, "impl", kind), sa.String)


def fit_page(session: Session, query: sa.Select, model: Any,
             columns: Iterable[sa.ColumnElement], max_bytes: int) -> tuple[sa.Select, bool]:
    """``query`` (a page) narrowed to its first rows whose text ``columns`` (what the page
    shows) hold at most ``max_bytes`` in all (at least one row), and whether rows were left
    out: a page of the largest rows allowed costs megabytes, not gigabytes. Only ids and
    lengths are read for that."""
    # PostgreSQL's octet_length reads a TOASTed value's size from its header, unlike length
    length = sa.func.octet_length if session.get_bind().dialect.name == "postgresql" \
        else sa.func.length
    sizes = [sa.func.coalesce(length(c), 0) for c in columns if _text(c)]
    if not max_bytes or not sizes:
        return query, False
    rows = session.execute(query.with_only_columns(model.id, sum(sizes[1:], sizes[0]))).all()
    ids: list[int] = []
    total = 0
    for row_id, size in rows:
        total += int(size or 0)
        if ids and total > max_bytes:
            break
        ids.append(row_id)
    if len(ids) == len(rows):
        return query, False
    return query.where(model.id.in_(ids)), True
