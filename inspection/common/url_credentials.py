"""Hiding the password in URLs such as ``https://user:PASS@bmc.example.com/redfish``.

BMC addresses (``redfish_address``, ``ipmi_address`` given as URLs...) and transport URLs can
carry credentials under keys whose names say nothing secret, so masking by key name alone
shows them.
"""

import re

# scheme://user:password@ - the password runs to the last "@" before the path, so an
# unencoded "@" in it is hidden too.
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)"
                       r"(?P<password>[^/?#\s]*)(?=@)")


def has_url_password(text: str) -> bool:
    """True if ``text`` holds a URL with a password in it."""
    return "://" in text and "@" in text and _USERINFO.search(text) is not None


def mask_url_passwords(text: str, mask: str) -> str:
    """``text`` with the password of every URL in it replaced by ``mask``."""
    if "://" not in text or "@" not in text:
        return text
    return _USERINFO.sub(lambda m: m.group("head") + mask, text)
