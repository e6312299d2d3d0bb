"""Building the Flask application of the inspection API."""

import logging
import re
from typing import Any

from flask import Flask, request
from oslo_config import cfg
from oslo_context import context as oslo_context
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker
from werkzeug.routing import BaseConverter, Map

from inspection import process_identity
from inspection.api import (
    authz,
    chassis,
    continue_inspection,
    crosssite,
    errors,
    metrics,
    middleware,
    node_groups,
    nodes,
    openapi,
    ports,
    power,
    ratelimit,
    refusals,
    rejections,
    reprocess,
    rule_trials,
    rules,
    traits,
    versions,
)
from inspection.api.addresses import client_address, proxy_headers_parsed
from inspection.api.auth import REALM, BasicAuth, Throttled, default_concurrency
from inspection.api.context import EXTENSION, ApiContext
from inspection.api.dispatch import InProcessDispatcher, RpcDispatcher
from inspection.api.nodes_query import check_node_ident
from inspection.worker.recovery import ReservationRepair
from pxe_filter.broadcast import FilterNotifier
from pxe_filter.common import messaging
from pxe_filter.common.database import engine_from_conf

LOG = logging.getLogger("inspection.api")

#: Endpoints anyone may call: the ramdisk callback and the documents describing the API.
PUBLIC_ENDPOINTS = frozenset({"continue_inspection.continue_inspection", "openapi.openapi",
                              "versions.root", "versions.version"})


def _default_service(conf: cfg.ConfigOpts, engine: Engine, notifier: FilterNotifier) -> Any:
    from inspection.processing.service import InspectionService  # noqa: PLC0415

    return InspectionService.from_conf(conf, engine=engine, notifier=notifier)


def _default_dispatcher(conf: cfg.ConfigOpts, service: Any, engine: Engine) -> Any:
    url = messaging.configured_transport_url(conf)
    if url:
        repair = ReservationRepair(engine, process_identity.of(conf),
                                   conf.processing.heartbeat_interval)
        dispatcher = RpcDispatcher(engine, messaging.get_transport(url), repair)
        repair.start()
        return dispatcher
    return InProcessDispatcher(service, conf, conf.api.processing_threads)


def _install_request_context(app: Flask, conf: cfg.ConfigOpts) -> None:
    # oslo.log prints the context of the thread: the request ID (and, with Keystone, the
    # user and project) in every line logged while handling the request.
    keystone = conf.api.auth_strategy == "keystone"

    @app.before_request
    def remember_context():
        if keystone:
            authz.request_context().update_store()
        else:  # identity headers are only trustworthy behind keystonemiddleware
            oslo_context.RequestContext(
                request_id=request.environ.get("openstack.request_id")).update_store()


def _install_auth(app: Flask, conf: cfg.ConfigOpts) -> None:
    if conf.api.auth_strategy == "keystone":
        authz.install(app, conf, PUBLIC_ENDPOINTS)  # keystonemiddleware checked the token
        return
    if conf.api.auth_strategy == "noauth":
        return
    checker = BasicAuth(conf.api.http_basic_auth_user_file,
                        max_failures=conf.api.auth_max_failures,
                        failure_window=conf.api.auth_failure_window,
                        concurrency=conf.api.auth_concurrency or default_concurrency(),
                        queue_length=conf.api.auth_queue_length,
                        queue_timeout=conf.api.auth_queue_timeout)

    behind_proxy = proxy_headers_parsed(conf)

    @app.before_request
    def authenticate():
        if request.endpoint in PUBLIC_ENDPOINTS:
            return None
        try:
            if checker.check(request.headers.get("Authorization"),
                             client_address(behind_proxy)) is not None:
                return None
        except Throttled as exc:
            return errors.json_error(429, f"Too many login attempts ({exc}); retry in "
                                          f"{exc.retry_after} s",
                                     {"Retry-After": str(exc.retry_after)})
        return errors.json_error(401, "Authentication required",
                                 {"WWW-Authenticate": f'Basic realm="{REALM}"'})


def _install_node_names(app: Flask) -> None:
    # Below 1.5 Ironic finds a node by its UUID only: a path naming it otherwise gets 404
    # before any handler, also those that reserve the node without looking it up here. A
    # PUT on traits is Ironic's 405 there, whatever the node (traits.py).
    @app.before_request
    def nodes_by_uuid_before_names():
        ident = (request.view_args or {}).get("node_ident")
        if ident is not None and not (request.method == "PUT"
                                      and request.blueprint == "traits"):
            check_node_ident(ident)


def _install_input_checks(app: Flask) -> None:
    # PostgreSQL refuses NUL in text: one check here instead of a 500 in every query that
    # uses a path or query parameter (node names, ?provision_state=, ?scope=...).
    @app.before_request
    def refuse_nul():
        if "\x00" in request.path:
            return errors.json_error(400, "The URL path contains a NUL character (%00)")
        for name, value in request.args.items(multi=True):
            if "\x00" in name or "\x00" in value:
                return errors.json_error(400, "A query parameter contains a NUL character "
                                              "(%00)")
        return None


class IdentConverter(BaseConverter):
    """A path segment other than ``reserved``, the collection's own fixed sub-path, so that
    e.g. PATCH /v1/nodes/detail is a method /v1/nodes/detail lacks (405), not node "detail"."""

    def __init__(self, url_map: Map, reserved: str) -> None:
        super().__init__(url_map)
        self.regex = rf"(?!{re.escape(reserved)}$)[^/]+"


def _normalise_paths(wsgi_app: Any, roots: set[str]) -> Any:
    # python-ironicclient adds a slash before a query string (/v1/nodes/?limit=1), and
    # Ironic serves every path with or without one. Ironic also serves a path without a
    # version (/nodes, a bookmark link) as v1: so does this API, except its own ``roots``.
    def app(environ: dict, start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if len(path) > 1 and path.endswith("/"):
            path = path.rstrip("/") or "/"
        if path.split("/", 2)[1] not in roots:
            path = "/v1" + path
        environ["PATH_INFO"] = path
        return wsgi_app(environ, start_response)

    return app


def create_app(conf: cfg.ConfigOpts, service: Any = None, dispatcher: Any = None,
               engine: Engine | None = None, notifier: FilterNotifier | None = None) -> Flask:
    """The API app for ``conf``.

    Loads the htpasswd file, and through the service the hooks and built-in rules, once
    (raising their errors, for the caller to report at start-up); the rules endpoints share
    the service's repository. ``service`` defaults to the real InspectionService,
    ``dispatcher`` to a worker client when ``[DEFAULT]transport_url`` is set, else to
    threads of this process; both store accepted data in the database first.
    """
    engine = engine if engine is not None else engine_from_conf(conf)
    notifier = notifier if notifier is not None else FilterNotifier.from_conf(conf)
    if service is None:
        service = _default_service(conf, engine, notifier)
    if dispatcher is None:
        dispatcher = _default_dispatcher(conf, service, engine)
    app = Flask("inspection.api", static_folder=None)
    app.url_map.converters["ident"] = IdentConverter
    app.config["MAX_CONTENT_LENGTH"] = conf.api.max_request_body_size
    app.config["JSON_SORT_KEYS"] = False
    app.json.sort_keys = False
    app.extensions[EXTENSION] = ApiContext(
        conf=conf, engine=engine, sessions=sessionmaker(engine, expire_on_commit=False),
        rules=service.rules.repository, rules_engine=service.rules_engine, notifier=notifier,
        service=service, dispatcher=dispatcher)
    errors.register(app)
    crosssite.install(app, conf)
    ratelimit.install(app, conf)
    rejections.install(app, conf)
    refusals.install(app)
    versions.install(app)
    _install_request_context(app, conf)
    _install_input_checks(app)
    _install_auth(app, conf)
    _install_node_names(app)
    metrics.install(app)
    for module in (versions, openapi, continue_inspection, rules, nodes, traits,
                   node_groups, power, ports, rule_trials, reprocess, chassis):
        app.register_blueprint(module.bp)
    roots = {rule.rule.split("/", 2)[1] for rule in app.url_map.iter_rules()}
    app.wsgi_app = middleware.wrap(_normalise_paths(app.wsgi_app, roots), conf)
    return app


def close_app(app: Flask) -> None:
    """Let in-flight processing finish and release the bus and the database."""
    context: ApiContext = app.extensions[EXTENSION]
    context.dispatcher.close()
    context.notifier.close()
    context.engine.dispose()
