"""``/v1/chassis``: Ironic's chassis (a UUID, a description and ``extra`` grouping nodes),
listed, created, changed and deleted as in Ironic, and the nodes of each."""

import uuid as uuidlib

import sqlalchemy as sa
from flask import Blueprint, Response, jsonify

from inspection.api import nodes
from inspection.api.context import ctx, json_body, json_object
from inspection.api.errors import ApiError
from inspection.api.pagination import (
    PAGE_ARGS,
    check_args,
    detail_and_fields,
    fields_arg,
    next_link,
    page_args,
    paginate,
)
from inspection.api.patching import apply as apply_patch
from inspection.api.versions import resource_links
from inspection.api.views import plain
from inspection.db.idents import canonical_uuid
from inspection.db.models import Chassis, Node

bp = Blueprint("chassis", __name__)

#: Every field, and those of a list without ``detail`` (Ironic's defaults).
FIELDS = ("uuid", "description", "extra", "created_at", "updated_at", "nodes")
BRIEF_FIELDS = ("uuid", "description")
PATCHABLE = ("description", "extra")
DESCRIPTION_LENGTH = 255
_SORT_KEYS = {name: getattr(Chassis, name) for name in (
    "id", "uuid", "description", "created_at", "updated_at")}


def chassis_uuid_arg(value: str) -> str:
    """``value`` as a canonical UUID; 400 as Ironic answers a malformed chassis UUID."""
    uuid = canonical_uuid(value)
    if uuid is None:
        raise ApiError(400, f"Expected UUID for chassis_uuid: {value[:64]}")
    return uuid


def find_chassis(session: sa.orm.Session, ident: str) -> Chassis:
    """The chassis with UUID ``ident``: 400 if malformed, 404 if unknown."""
    uuid = chassis_uuid_arg(ident)
    chassis = session.execute(sa.select(Chassis).where(Chassis.uuid == uuid)
                              ).scalar_one_or_none()
    if chassis is None:
        raise ApiError(404, f"Chassis {uuid} could not be found.")
    return chassis


def chassis_view(chassis: Chassis, fields: list[str] | tuple[str, ...] = FIELDS) -> dict:
    """A chassis as Ironic shows it (only ``fields``; ``links`` always)."""
    full = {"uuid": chassis.uuid, "description": chassis.description,
            "extra": chassis.extra or {}, "created_at": plain(chassis.created_at),
            "updated_at": plain(chassis.updated_at),
            "nodes": resource_links(f"chassis/{chassis.uuid}/nodes")}
    data = {name: full[name] for name in fields}
    data["links"] = resource_links(f"chassis/{chassis.uuid}")
    return data


def _problems(values: dict) -> list[str]:
    problems = []
    description = values.get("description")
    if description is not None and (not isinstance(description, str)
                                    or len(description) > DESCRIPTION_LENGTH):
        problems.append(f"description: must be a string of at most {DESCRIPTION_LENGTH} "
                        f"characters")
    if values.get("extra") is not None and not isinstance(values["extra"], dict):
        problems.append("extra: must be an object")
    return problems


def _list(path: str, detail_path: bool) -> Response:
    check_args((*PAGE_ARGS, *(() if detail_path else ("detail", "fields"))))
    detail, fields = detail_and_fields(FIELDS, detail_path)
    page = page_args(_SORT_KEYS)
    with ctx().session() as session:
        marker = find_chassis(session, page.marker) if page.marker else None
        rows = session.execute(paginate(sa.select(Chassis), Chassis, page, _SORT_KEYS, marker)
                               ).scalars().all()
        shown = fields or (FIELDS if detail else BRIEF_FIELDS)
        body: dict = {"chassis": [chassis_view(c, shown) for c in rows]}
    following = next_link(len(rows), rows[-1].uuid if rows else None, page, path)
    if following:
        body["next"] = following
    return jsonify(body)


@bp.get("/v1/chassis")
def list_chassis() -> Response:
    """Chassis, paged and sorted as in Ironic (UUID and description unless ``detail``)."""
    return _list("/v1/chassis", detail_path=False)


@bp.get("/v1/chassis/detail")
def list_chassis_detail() -> Response:
    """Chassis with every field."""
    return _list("/v1/chassis/detail", detail_path=True)


@bp.post("/v1/chassis")
def create_chassis() -> tuple[Response, int, dict]:
    """Create a chassis (any UUID given, else a new one); 201 with its Location."""
    body = json_object()
    problems = [f"{name}: unknown field" for name in sorted(set(body) - {"uuid", *PATCHABLE})]
    problems.extend(_problems(body))
    uuid = body.get("uuid")
    if uuid is not None and canonical_uuid(uuid) is None:
        problems.append("uuid: must be a UUID")
    if problems:
        raise ApiError(400, "Invalid chassis: " + "; ".join(problems), problems=problems)
    chassis = Chassis(uuid=canonical_uuid(uuid) if uuid else str(uuidlib.uuid4()),
                      description=body.get("description"), extra=body.get("extra") or {})
    try:
        with ctx().session() as session:
            session.add(chassis)
            session.flush()
            view = chassis_view(chassis)
    except sa.exc.IntegrityError:
        raise ApiError(409, f"A chassis with UUID {chassis.uuid} already exists.") from None
    return jsonify(view), 201, {"Location": view["links"][0]["href"]}


@bp.get("/v1/chassis/<ident(\"detail\"):ident>")
def show_chassis(ident: str) -> Response:
    """One chassis by UUID (only ``fields`` if given)."""
    check_args(("fields",))
    fields = fields_arg(FIELDS)
    with ctx().session() as session:
        return jsonify(chassis_view(find_chassis(session, ident), fields or FIELDS))


@bp.patch("/v1/chassis/<ident(\"detail\"):ident>")
def patch_chassis(ident: str) -> Response:
    """Apply an RFC 6902 patch to ``description`` and ``extra``; 200 with the chassis."""
    check_args(())
    body = json_body()
    c = ctx()
    with c.session() as session:
        chassis = find_chassis(session, ident)
        before = {"description": chassis.description, "extra": chassis.extra or {}}
        values = apply_patch(before, body, PATCHABLE, {"description": None, "extra": {}},
                             c.conf.inspection_rules.max_node_size, what="chassis")
        problems = _problems(values)
        if problems:
            raise ApiError(400, "Invalid chassis: " + "; ".join(problems), problems=problems)
        chassis.description, chassis.extra = values["description"], values["extra"] or {}
        session.flush()
        return jsonify(chassis_view(chassis))


@bp.delete("/v1/chassis/<ident(\"detail\"):ident>")
def delete_chassis(ident: str) -> tuple[str, int]:
    """Delete a chassis that holds no node (400 otherwise, as Ironic)."""
    check_args(())
    with ctx().session() as session:
        chassis = find_chassis(session, ident)
        if session.execute(sa.select(Node.id).where(Node.chassis_id == chassis.id)
                           .limit(1)).first() is not None:
            raise ApiError(400, f"Cannot complete the requested action because chassis "
                                f"{chassis.uuid} contains nodes.")
        session.delete(chassis)
    return "", 204


def _chassis_nodes(ident: str, detail_path: bool) -> Response:
    with ctx().session() as session:
        uuid = find_chassis(session, ident).uuid
    suffix = "/detail" if detail_path else ""
    return nodes.list_nodes_of(f"/v1/chassis/{uuid}/nodes{suffix}", detail_path, uuid)


@bp.get("/v1/chassis/<ident(\"detail\"):ident>/nodes")
def list_chassis_nodes(ident: str) -> Response:
    """The chassis' nodes, as ``GET /v1/nodes?chassis_uuid=`` lists them."""
    return _chassis_nodes(ident, detail_path=False)


@bp.get("/v1/chassis/<ident(\"detail\"):ident>/nodes/detail")
def list_chassis_nodes_detail(ident: str) -> Response:
    """The chassis' nodes with every field."""
    return _chassis_nodes(ident, detail_path=True)
