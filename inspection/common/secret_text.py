"""Masking secrets in free text (error messages from outside), as OpenStack services do.

oslo.utils' ``mask_password`` knows the shapes ``password=x``, ``"password": "x"``,
``--password x`` and their kin; the password of a URL (``https://user:PASS@bmc/``) is
masked as in the rules' data.
"""

from oslo_utils import strutils

from inspection.common.url_credentials import mask_url_passwords

#: Ironic's mask string, as the API shows secrets.
TEXT_MASK = "******"


def mask_text(text: str, mask: str = TEXT_MASK) -> str:
    """``text`` with every password-like value and URL password replaced by ``mask``."""
    return strutils.mask_password(mask_url_passwords(text, mask), secret=mask)
