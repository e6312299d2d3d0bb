"""The OpenAPI document of the whole API (``openapi.yaml``, served at
``GET /v1/openapi.json``)."""

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
