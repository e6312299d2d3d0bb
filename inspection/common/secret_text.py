"""Masking secrets in free text (ramdisk and BMC messages, log lines, error bodies).

oslo.utils' ``mask_password`` knows ``password=x``, ``"password": "x"``, ``--password x`` and
their kin. It misses what ramdisks and BMC tools print as often: ``password: x`` and the short
names (``passwd``, ``pwd``, ``pass``), ``ipmitool ... -P x``, ``X-Auth-Token: x`` and
``Authorization: Basic x``; those are masked here too, as is the password of a URL
(``https://user:PASS@bmc/``).
"""

import logging
import re

from oslo_utils import strutils

from inspection.common.url_credentials import mask_url_passwords

#: Ironic's mask string, as the API shows secrets.
TEXT_MASK = "******"

_VALUE = r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&]+)"
#: ``key: value`` and ``key = value`` for secret-named keys, the key possibly prefixed
#: (``X-Auth-Token``, ``ipmi_password``) and quoted (``"pwd": "x"``).
_KEY_VALUE = re.compile(
    r"(?P<head>(?<![A-Za-z0-9])(?:[A-Za-z0-9]+[_-])*"
    r"(?:password|passwd|passphrase|pwd|pass|secret|token|api[_-]?key|private[_-]?key)"
    r"[\"']?[ \t]*[:=][ \t]*)" + _VALUE, re.IGNORECASE)
#: ``Authorization: Basic x`` (and Bearer, Digest..., or no scheme).
_AUTHORIZATION = re.compile(
    r"(?P<head>(?<![A-Za-z0-9])(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:(?:basic|bearer|digest|negotiate|token)[ \t]+)?)(?P<value>[^\s\"',;]+)", re.IGNORECASE)
#: An ipmitool command line, and its password (``-P``) and Kg key (``-k``, ``-y``) arguments.
_IPMITOOL = re.compile(r"\bipmitool\b[^\n]*", re.IGNORECASE)
_IPMITOOL_SECRET = re.compile(r"(?P<head>[ \t]-[Pky][ \t]*)" + _VALUE)
#: Lower-case words without which no pattern above can match (a cheap first test).
_HINTS = ("pass", "pwd", "secret", "token", "key", "authorization", "ipmitool", "://")


def _masked_value(mask: str):
    def replace(match: re.Match) -> str:
        value = match.group("value")
        quote = value[0] if value[:1] in ("'", '"') and len(value) > 1 else ""
        return f"{match.group('head')}{quote}{mask}{quote}"
    return replace


def mask_text(text: str, mask: str = TEXT_MASK) -> str:
    """``text`` with every password-like value and URL password replaced by ``mask``."""
    lowered = text.lower()
    if not any(hint in lowered for hint in _HINTS):
        return text
    text = strutils.mask_password(mask_url_passwords(text, mask), secret=mask)
    replace = _masked_value(mask)
    if "ipmitool" in lowered:
        text = _IPMITOOL.sub(lambda line: _IPMITOOL_SECRET.sub(replace, line.group()), text)
    text = _AUTHORIZATION.sub(replace, text)
    return _KEY_VALUE.sub(replace, text)


class MaskingFilter(logging.Filter):
    """Masks secrets in every record that passes a handler (the message as formatted)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message by its masked text; never drops a record."""
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # a broken format string: the formatter reports it
        masked = mask_text(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def install_log_masking(logger: logging.Logger | None = None) -> None:
    """Mask every line written by the handlers of ``logger`` (the root logger by default);
    call after logging is set up."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, MaskingFilter) for f in handler.filters):
            handler.addFilter(MaskingFilter())
