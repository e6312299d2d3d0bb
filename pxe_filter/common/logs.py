"""Logging of every service through oslo.log, with this project's defaults.

Defaults differ from oslo.log's in two ways: the log goes to stderr (journald collects it
under systemd; oslo.log would fall back to stdout), and lines keep the shape operators and
tests grep for (``... LEVEL logger: message``). :func:`set_defaults` is also the
``oslo.config.opts.defaults`` hook, so generated samples show the same defaults.
"""

import logging
import re

from oslo_config import cfg
from oslo_log import _options as log_options  # the Opt objects register_options registers
from oslo_log import log

from pxe_filter.common.config import ConfigError

#: One line per record: time, pid, level, logger, message.
LINE_FORMAT = "%(asctime)s.%(msecs)03d %(process)d %(levelname)s %(name)s: %(message)s"

# Libraries that narrate every connection attempt at INFO; their warnings still show.
QUIET_LIBRARIES = ("kombu=WARN", "oslo_messaging._drivers=WARN",
                   "oslo.messaging._drivers=WARN", "oslo_service.backend=WARN",
                   "alembic.runtime.migration=WARN")


def set_defaults() -> None:
    """Our defaults for oslo.log's options (idempotent)."""
    levels = log.get_default_log_levels()
    log.set_defaults(default_log_levels=levels + [q for q in QUIET_LIBRARIES
                                                  if q not in levels])
    cfg.set_defaults(log_options.generic_log_opts, use_stderr=True)
    cfg.set_defaults(log_options.log_opts, logging_default_format_string=LINE_FORMAT)


def register_options(conf: cfg.ConfigOpts, name: str) -> None:
    """Register oslo.log's options on ``conf`` (before parsing) and log with the defaults
    until :func:`setup` applies the files, so that errors while loading them look alike."""
    set_defaults()
    if "use_stderr" not in conf:
        log.register_options(conf)
    log.setup(conf, name, fix_eventlet=False)
    _explicit_errors_only()


def setup(conf: cfg.ConfigOpts, name: str, debug: bool = False) -> None:
    """Configure logging from the parsed ``conf``; ``debug`` forces DEBUG (``--debug``).

    Raises ConfigError when oslo.log cannot apply the options (an unreadable
    log_config_append, a log_dir that cannot be written, use_journal without the systemd
    Python bindings).
    """
    if debug:
        # An override survives SIGHUP: oslo.log's mutate hook keeps DEBUG on reload.
        conf.set_override("debug", True)
    try:
        log.setup(conf, name, fix_eventlet=False)
        _explicit_errors_only()
    except (OSError, RuntimeError, ValueError, TypeError, cfg.Error, log.LogConfigError) as exc:
        hint = ("use_journal needs the systemd Python bindings (systemd-python, Debian: "
                "python3-systemd) or use_stderr under systemd" if "ystemd" in str(exc) else
                "check [DEFAULT]log_file, log_dir, log_config_append and use_journal")
        raise ConfigError(f"cannot set up logging: {exc}; {hint}") from None


def log_option_values(conf: cfg.ConfigOpts, log: logging.Logger) -> None:
    """Every option's value at DEBUG, secrets as ``****``, as oslo.service-based services log
    them at start (nothing is written unless ``debug`` is on).

    Reading every option is also where a malformed value in a file surfaces first: it is a
    :class:`ConfigError` (exit 2, one line), not a traceback.
    """
    try:
        conf.log_opt_values(log, logging.DEBUG)
    except (cfg.Error, ValueError) as exc:
        raise ConfigError(_invalid_value(conf) or f"invalid configuration: {exc}") from None


def _invalid_value(conf: cfg.ConfigOpts) -> str | None:
    """``invalid value of [section]option in FILE: why`` for the first option whose value
    does not parse (oslo.config's own message names neither the section nor the file in
    words)."""
    pending = [("DEFAULT", key, conf) for key in conf]
    for group, name, holder in pending:  # a group's options are appended as it is met
        try:
            value = holder[name]
        except cfg.ConfigFileValueError as exc:
            text = str(exc)
            where = re.search(r"detail='([^']+)'", text)
            return (f"invalid value of [{group}]{name}{' in ' + where[1] if where else ''}: "
                    f"{text.rpartition(' is not valid: ')[2]}")
        except cfg.Error:
            continue
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            pending += [(name, option, value) for option in value]
    return None


class _ExplicitErrorsOnly(logging.Formatter):
    """oslo.log's formatter, minus the summary of the exception being handled.

    oslo.log appends that summary to every WARNING or worse logged inside an ``except``
    block. Our messages already say what failed, in words that mask secrets (database and
    bus URLs, sensitive rules); the raw exception may not. A traceback asked for explicitly
    (``LOG.exception``, ``exc_info=``) is still written.
    """

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        """Format with the inner formatter, hiding the exception being handled."""
        try:
            # oslo.log never summarises an implicit ValueError (it marks missing data).
            raise ValueError
        except ValueError:
            return self.inner.format(record)


def _explicit_errors_only() -> None:
    for handler in logging.getLogger().handlers:
        formatter = handler.formatter
        if formatter is not None and not isinstance(formatter, _ExplicitErrorsOnly) \
                and type(formatter).__module__ == "oslo_log.formatters":
            handler.setFormatter(_ExplicitErrorsOnly(formatter))
