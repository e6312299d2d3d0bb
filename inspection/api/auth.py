"""HTTP basic authentication against an htpasswd file of bcrypt hashes (Ironic's standalone
mode), re-read whenever the file changes.

Guessing is made slow and useless without locking anyone else out. Every check costs the
bcrypt work of the costliest hash in the file, whoever the user and whatever their hash's cost
(no user enumeration by timing). Failures are counted per (user name, client address) pair,
an IPv6 client by its /64 (:mod:`inspection.api.login_records`): a pair with too many is
refused without any work for a while (429), and no other pair is. At most a few password
checks run at once, the others waiting in a short priority queue
(:mod:`inspection.api.login_queue`) ranked by the recent failures and refusals of the pair,
then of the address, then of the account: a user who has not failed from that address goes
before every guesser that has, however many addresses the guessers rotate through.
Passwords are compared on their first 72 bytes, as htpasswd and Apache do."""

import base64
import binascii
import hashlib
import hmac
import logging
import os
import re
import secrets
import threading

import bcrypt

from inspection import metrics
from inspection.api.login_queue import LoginQueue, QueueFull
from inspection.api.login_records import LoginRecords
from inspection.api.ratelimit import client_key
from inspection.common.untrusted import for_log

LOG = logging.getLogger("inspection.api.auth")

REALM = "ironic-inspection"
_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")
# Verified credentials are remembered (as keyed digests) because bcrypt costs ~0.1-0.3 s.
_CACHE_LIMIT = 256
_COST = re.compile(rb"\$2[aby]\$(\d\d)\$")
#: bcrypt uses the first 72 bytes of a password; so do htpasswd and Apache.
BCRYPT_MAX_BYTES = 72


class Throttled(Exception):
    """Too many failures as this user from this client, or too many checks at once; retry
    later."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def default_concurrency() -> int:
    """Password checks at once when unconfigured: half the CPUs, so that bcrypt (which
    releases the GIL) always leaves CPU time to the other requests."""
    return max(1, (os.cpu_count() or 2) // 2)


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

    def __init__(self, path: str, *, max_failures: int = 10, failure_window: int = 60,
                 concurrency: int = 2, queue_length: int = 2,
                 queue_timeout: float = 10.0) -> None:
        self.path = path
        self.max_failures = max_failures
        self.failure_window = failure_window
        self._lock = threading.Lock()
        self._key = secrets.token_bytes(32)
        self._stamp: tuple | None = None
        self._users: dict[str, bytes] = parse_htpasswd(path)
        self._dummy = _dummy_hash(self._users)
        self._stamp = self._file_stamp()
        self._verified: set[bytes] = set()
        self._records = LoginRecords(failure_window, max_failures)
        self._queue = LoginQueue(concurrency, queue_length, queue_timeout)

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
                    self._dummy = _dummy_hash(self._users)
                self._stamp = stamp
            return self._users

    def check(self, header: str | None, client: str = "") -> str | None:
        """The authenticated user name, or None; raises :class:`Throttled`."""
        if not header or header[:6].lower() != "basic ":
            return None
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        if not sep:
            return None
        address = client_key(client)
        users = self._current_users()
        stored = users.get(user)
        digest = hmac.new(self._key, b"\0".join([user.encode(), password.encode(),
                                                 stored or b""]), hashlib.sha256).digest()
        with self._lock:
            remembered = stored is not None and digest in self._verified
        if remembered:
            return self._accept(user, address)
        wait = self._records.refusal(user, address)
        if wait:
            # No bcrypt work for a pair whose budget is spent: it cannot use up the checks.
            metrics.LOGINS.labels("throttled").inc()
            raise Throttled(f"{self.max_failures} failed logins as this user from this "
                            f"address", wait)
        try:
            with self._queue.slot(address, self._records.rank(user, address)):
                ok = self._verify(password.encode()[:BCRYPT_MAX_BYTES], stored)
        except QueueFull as exc:
            metrics.LOGINS.labels("queue_full").inc()
            self._records.refused(user, address, digest)
            raise Throttled(str(exc), 1) from None
        if ok:
            with self._lock:
                if len(self._verified) >= _CACHE_LIMIT:
                    self._verified.clear()
                self._verified.add(digest)
            return self._accept(user, address)
        metrics.LOGINS.labels("failed").inc()
        if self._records.failed(user, address) == self.max_failures:
            LOG.warning("%d failed logins as user %s from %s within %d s: refusing that "
                        "user's logins from that address for up to %d s", self.max_failures,
                        for_log(user, 64), address or "an unknown address",
                        self.failure_window, self.failure_window)
        return None

    def _accept(self, user: str, address: str) -> str:
        self._records.succeeded(user, address)
        metrics.LOGINS.labels("ok").inc()
        return user

    def _verify(self, secret: bytes, stored: bytes | None) -> bool:
        # Every check costs what the costliest hash in the file costs: an unknown user is
        # checked against the dummy hash, a user hashed at a lower cost pays the difference
        # with the dummy too. The time never tells who exists, nor whose hash is weak.
        dummy = self._dummy
        ok = False
        if stored is not None:
            try:
                ok = bcrypt.checkpw(secret, stored)
            except ValueError:  # a malformed hash
                ok = False
        if stored is None or _cost(stored) < _cost(dummy):
            bcrypt.checkpw(secret, dummy)
        return ok


def _cost(digest: bytes) -> int:
    match = _COST.match(digest)
    return int(match.group(1)) if match else 0


def _dummy_hash(users: dict[str, bytes]) -> bytes:
    """A bcrypt hash of a random password, as costly as the costliest of the users' hashes."""
    costs = [_cost(h) for h in users.values()]
    rounds = max(costs) if costs else 12
    return bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(max(4, min(rounds, 31))))
