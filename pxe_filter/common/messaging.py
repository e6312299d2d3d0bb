"""oslo.messaging set-up without eventlet.

oslo.service 4.x still defaults to eventlet; the threading backend must be selected before
oslo_messaging is imported anywhere, so every module that needs oslo_messaging imports it
through :func:`oslo_messaging_module`.
"""

import logging
import warnings
from types import ModuleType

from oslo_config import cfg
from oslo_service import backend

#: AMQP's basic.cancel: the broker cancels the consumer of a queue deleted while the channel
#: closes (our fanout and reply queues auto-delete at stop). amqp warns of it at every stop.
_CANCEL_WHILE_CLOSING = (60, 30)


def _not_a_cancel_while_closing(record: logging.LogRecord) -> bool:
    return not (str(record.msg).startswith("Received method %s during closing channel")
                and isinstance(record.args, tuple) and record.args
                and record.args[0] == _CANCEL_WHILE_CLOSING)


def oslo_messaging_module() -> ModuleType:
    """Import oslo_messaging after selecting the threading backend."""
    # futurist imports eventlet when it is installed, which warns although we never use it.
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
    amqp_log = logging.getLogger("amqp")
    if _not_a_cancel_while_closing not in amqp_log.filters:
        amqp_log.addFilter(_not_a_cancel_while_closing)
    if backend.get_backend_type() is None:
        backend.init_backend(backend.BackendType.THREADING)
    import oslo_messaging  # noqa: PLC0415 - must follow backend selection
    return oslo_messaging


def get_transport(url: str):
    """An RPC transport for ``url``.

    Always built on the global ``cfg.CONF``: oslo.messaging's client reads option groups that
    it registers only there.
    """
    messaging = oslo_messaging_module()
    return messaging.get_rpc_transport(cfg.CONF, url=url)


def _set_by_operator(conf: cfg.ConfigOpts, group: str | None) -> str | None:
    """``[group]transport_url`` (registered from oslo.messaging's public option listing, what
    oslo-config-generator reads) if the operator set it, else None."""
    from oslo_messaging import opts as om_opts  # noqa: PLC0415 - after backend selection

    for listed, opts in om_opts.list_opts():
        if (listed or "DEFAULT") == (group or "DEFAULT"):
            conf.register_opts([opt for opt in opts if opt.name == "transport_url"],
                               group=group)
    location = conf.get_location("transport_url", group)
    if location is None or location.location == cfg.Locations.opt_default:
        return None
    return (conf[group] if group else conf).transport_url or None


def configured_transport_url(conf: cfg.ConfigOpts) -> str | None:
    """``[DEFAULT]transport_url`` if the operator set it, else None.

    oslo.messaging defaults the option to ``rabbit://``; we need to know whether it was set,
    because an unset transport means "no message bus" (all-in-one mode, no broadcasts).
    """
    oslo_messaging_module().set_transport_defaults("ironic")
    return _set_by_operator(conf, None)


def configured_notification_url(conf: cfg.ConfigOpts) -> str | None:
    """``[oslo_messaging_notifications]transport_url``, else ``[DEFAULT]transport_url``,
    else None (neither was set by the operator)."""
    oslo_messaging_module()
    return (_set_by_operator(conf, "oslo_messaging_notifications")
            or configured_transport_url(conf))


def start_rpc_server(transport, target, endpoints: list):
    """Start an RPC server that exposes only the endpoints' ``@expose``d methods."""
    messaging = oslo_messaging_module()
    server = messaging.get_rpc_server(transport, target, endpoints,
                                      access_policy=messaging.ExplicitRPCAccessPolicy)
    server.start()
    return server
