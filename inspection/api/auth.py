"""HTTP basic authentication against an htpasswd file of bcrypt hashes (Ironic's standalone
mode), re-read whenever the file changes."""

import base64
import binascii
import hashlib
import hmac
import logging
import os
import secrets
import threading

import bcrypt

LOG = logging.getLogger("inspection.api.auth")

REALM = "ironic-inspection"
_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")
# Verified credentials are remembered (as keyed digests) because bcrypt costs ~0.1-0.3 s.
_CACHE_LIMIT = 256


class HtpasswdError(Exception):
    """The htpasswd file cannot be used; the message names the file and the problem."""


def parse_htpasswd(path: str) -> dict[str, bytes]:
    """``user -> bcrypt hash`` from ``path``; every problem of the file at once."""
    try:
        with open(path, encoding="utf-8") as stream:
            lines = stream.read().splitlines()
    except OSError as exc:
        raise HtpasswdError(f"cannot read htpasswd file {path}: "
                            f"{exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise HtpasswdError(f"htpasswd file {path} is not UTF-8 text") from None
    users: dict[str, bytes] = {}
    problems = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, digest = line.partition(":")
        if not sep or not user or not digest:
            problems.append(f"line {number}: expected 'user:bcrypt-hash'")
        elif not digest.startswith(_BCRYPT_PREFIXES):
            problems.append(f"line {number}: user {user!r} has no bcrypt hash (create it "
                            f"with 'htpasswd -B')")
        else:
            users[user] = digest.encode()
    if problems:
        raise HtpasswdError(f"htpasswd file {path} is invalid: " + "; ".join(problems))
    if not users:
        raise HtpasswdError(f"htpasswd file {path} defines no user")
    return users


class BasicAuth:
    """Checks ``Authorization: Basic`` headers; the file is re-read when it changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._key = secrets.token_bytes(32)
        self._stamp: tuple | None = None
        self._users: dict[str, bytes] = parse_htpasswd(path)
        self._stamp = self._file_stamp()
        self._verified: set[bytes] = set()

    def _file_stamp(self) -> tuple | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _current_users(self) -> dict[str, bytes]:
        stamp = self._file_stamp()
        with self._lock:
            if stamp != self._stamp:
                self._verified.clear()
                try:
                    self._users = parse_htpasswd(self.path)
                except HtpasswdError as exc:
                    # Fail closed: nobody gets in until the file is fixed.
                    LOG.error("%s; rejecting every request until it is fixed", exc)
                    self._users = {}
                else:
                    LOG.info("Re-read htpasswd file %s (%d user(s))", self.path,
                             len(self._users))
                self._stamp = stamp
            return self._users

    def check(self, header: str | None) -> str | None:
        """The authenticated user name, or None."""
        if not header or header[:6].lower() != "basic ":
            return None
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        if not sep:
            return None
        stored = self._current_users().get(user)
        if stored is None:
            return None
        digest = hmac.new(self._key, b"\0".join([user.encode(), password.encode(), stored]),
                          hashlib.sha256).digest()
        with self._lock:
            if digest in self._verified:
                return user
        try:
            ok = bcrypt.checkpw(password.encode(), stored)
        except ValueError:  # a malformed hash
            ok = False
        if ok:
            with self._lock:
                if len(self._verified) >= _CACHE_LIMIT:
                    self._verified.clear()
                self._verified.add(digest)
            return user
        return None
