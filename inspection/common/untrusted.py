"""Making text from outside (the ramdisk, HTTP clients) safe to log, to store and to echo.

Two different needs: a log line must not be forged (a newline in an interface name would
start a fake log line), so control characters are *escaped* visibly; a database column must
accept the text (PostgreSQL refuses NUL, every backend refuses lone surrogates), so they are
*replaced* with U+FFFD. Both truncate.
"""

import re
from typing import Any

from inspection.common.secret_text import mask_text

REPLACEMENT = "\ufffd"
#: Longest ``last_error`` stored: a ramdisk may send megabytes of error text.
MAX_LAST_ERROR = 4096
#: Deepest nesting of JSON accepted from outside (IPA's inventory needs fewer than 10).
MAX_JSON_DEPTH = 64
#: Longest untrusted value put into one log line.
MAX_LOG_VALUE = 500
_ELLIPSIS = "..."

# C0 controls, DEL, C1 controls, lone surrogates (json.loads accepts "\ud800"); in logs also
# the Unicode line and paragraph separators, which some viewers break lines at.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_UNSAFE_EXCEPT_WHITESPACE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_LINE_BREAKS = re.compile(r"[\t\r\n]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:max(0, limit - len(_ELLIPSIS))] + _ELLIPSIS


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    if code <= 0xFF:
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\x{code:02x}")
    return f"\\u{code:04x}"


def for_log(value: Any, limit: int = MAX_LOG_VALUE) -> str:
    """``value`` as one safe log-line fragment: secrets masked, control characters and lone
    surrogates escaped (``\\n``, ``\\x00``), at most ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    return _truncate(_UNSAFE.sub(_escape, mask_text(_truncate(text, limit * 4))), limit)


def for_storage(value: Any, limit: int = MAX_LAST_ERROR) -> str:
    """``value`` as text every database accepts: tabs and line breaks become spaces, other
    control characters and lone surrogates U+FFFD; at most ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    text = _UNSAFE_EXCEPT_WHITESPACE.sub(REPLACEMENT, _truncate(text, limit))
    return _LINE_BREAKS.sub(" ", text)


def last_error_text(message: Any) -> str:
    """A node's ``last_error``: secrets masked, :func:`for_storage` with its limit."""
    text = message if isinstance(message, str) else repr(message)
    return for_storage(mask_text(text[:MAX_LAST_ERROR * 2]), MAX_LAST_ERROR)


def find_unstorable(value: Any, max_depth: int = MAX_JSON_DEPTH,
                    strings: bool = True) -> str | None:
    """The first problem that makes a JSON value unsafe to handle and store, or None.

    Looks at the nesting depth (recursive code further on would overflow the stack) and,
    with ``strings``, at every string (keys too) for NUL and unpaired surrogates, which
    text columns cannot store; iterative itself.
    """
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str) and strings:
            problem = _string_problem(item)
            if problem:
                return f"holds a string that {problem}"
        elif isinstance(item, (dict, list, tuple)):
            if depth >= max_depth:
                return f"is nested more than {max_depth} levels deep"
            children = (list(item.keys()) + list(item.values()) if isinstance(item, dict)
                        else item)
            stack.extend((child, depth + 1) for child in children)
    return None


def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    if _SURROGATE.search(text):
        return "contains an unpaired UTF-16 surrogate"
    return None

