"""The OpenAPI document of the whole API (``openapi.yaml``, served at
``GET /v1/openapi.json``) and the unauthenticated root and version documents."""

import functools
import os

import yaml
from flask import Blueprint, Response, jsonify

bp = Blueprint("openapi", __name__)

DOCUMENT = os.path.join(os.path.dirname(__file__), "openapi.yaml")


@functools.cache
def document() -> dict:
    """The parsed OpenAPI document."""
    with open(DOCUMENT, encoding="utf-8") as stream:
        return yaml.safe_load(stream)


@bp.get("/v1/openapi.json")
def openapi() -> Response:
    """The OpenAPI 3 document describing every endpoint."""
    return jsonify(document())


@bp.get("/")
def root() -> Response:
    """The list of API versions (as Ironic's root document)."""
    return jsonify({"name": "Ironic inspection service",
                    "description": "Inspection, auto-discovery and inspection rules",
                    "default_version": {"id": "v1", "status": "CURRENT"},
                    "versions": [{"id": "v1", "status": "CURRENT",
                                  "links": [{"href": "/v1", "rel": "self"}]}]})


@bp.get("/v1")
def version() -> Response:
    """The v1 resources."""
    resources = ("nodes", "ports", "inspection_rules", "continue_inspection", "openapi.json")
    return jsonify({"id": "v1", "status": "CURRENT",
                    "links": [{"href": f"/v1/{name}", "rel": name} for name in resources]})
