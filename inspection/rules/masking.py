"""Which keys hold secrets, and masked copies of data for logs, explain output and rules.

A key is secret when its lower-cased name contains one of :data:`SECRET_WORDS`, or ends in
one of :data:`SECRET_SUFFIXES` (``key`` alone would also hit ``keyboard`` or ``hotkey``-like
names, so it counts only as a whole word or a ``_key``/``-key`` suffix). Wherever the key,
the password inside a URL (``https://user:PASS@bmc/``) is masked too.
"""

import functools
import re
from typing import Any

from inspection.common.url_credentials import has_url_password, mask_url_passwords

#: What rules read in place of a secret (the rules specification's mask).
MASK = "***"
#: What the API and logs show in place of a secret (Ironic's mask string).
DISPLAY_MASK = "******"

SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token", "credential",
                "private_key", "privatekey", "api_key", "apikey", "auth_key", "psk")
SECRET_SUFFIXES = ("_key", "-key", "_kg")

_WORDS = re.compile("|".join(re.escape(w) for w in SECRET_WORDS))


@functools.lru_cache(maxsize=4096)
def is_secret_key(name: object) -> bool:
    """True if a dict key with this name holds a secret."""
    if not isinstance(name, str):
        return False
    lowered = name.lower()
    return (lowered == "key" or _WORDS.search(lowered) is not None
            or lowered.endswith(SECRET_SUFFIXES))


def has_secrets(value: Any) -> bool:
    """True if ``value`` (JSON-like) holds a secret key, or a URL with a password, anywhere."""
    if isinstance(value, dict):
        for key, sub in value.items():
            if is_secret_key(key) or has_secrets(sub):
                return True
    elif isinstance(value, (list, tuple)):
        return any(has_secrets(sub) for sub in value)
    elif isinstance(value, str):
        return has_url_password(value)
    return False


def masked(value: Any, mask: str = MASK) -> Any:
    """``value`` itself when it holds no secret, else a copy with every secret (the value of a
    secret-named key, the password of a URL) replaced by ``mask``."""
    if not has_secrets(value):
        return value
    return _mask_copy(value, mask)


def _mask_copy(value: Any, mask: str) -> Any:
    if isinstance(value, dict):
        return {key: (mask if is_secret_key(key) and sub not in (None, "")
                      else _mask_copy(sub, mask)) for key, sub in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask_copy(sub, mask) for sub in value]
    if isinstance(value, str):
        return mask_url_passwords(value, mask)
    return value


def should_mask(mode: str, sensitive: bool) -> bool:
    """Whether a rule reads masked data under ``[inspection_rules]mask_secrets = mode``."""
    if mode == "never":
        return False
    if mode == "sensitive":
        return not sensitive
    return True  # "always", and any unexpected value fails safe
