"""HTTP basic authentication against an htpasswd file of bcrypt hashes (Ironic's standalone
mode), re-read whenever the file changes.

Guessing is made slow and useless: every check costs the bcrypt work of the costliest hash in
the file, whoever the user and whatever their hash's cost (no user enumeration by timing); a
client address with too many failures is refused without any work for a while (429), except
for a user who logged in from that address before; and at most a few password checks run at
once, the others waiting in a short priority queue (:mod:`inspection.api.login_queue`) ranked
by the recent failures of the account, then of the address, so guessers occupy neither the
threads the ramdisk callback needs nor the admin's turn, even from rotating addresses.
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
import time
from collections import OrderedDict

import bcrypt

from inspection import metrics
from inspection.api.login_queue import LoginQueue, QueueFull

LOG = logging.getLogger("inspection.api.auth")

REALM = "ironic-inspection"
_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")
# Verified credentials are remembered (as keyed digests) because bcrypt costs ~0.1-0.3 s.
_CACHE_LIMIT = 256
#: Client addresses whose failures are remembered at most (oldest forgotten first).
_TRACKED_CLIENTS = 10000
#: Events remembered per client address (enough to rank it; memory stays bounded).
_EVENTS_PER_CLIENT = 1000
_COST = re.compile(rb"\$2[aby]\$(\d\d)\$")
#: Prefix of the keys that count events per account (user name, known or not: pooling
#: unknown names would tell them apart) beside those per address.
_ACCOUNT = "\0user:"
#: bcrypt uses the first 72 bytes of a password; so do htpasswd and Apache.
BCRYPT_MAX_BYTES = 72


class Throttled(Exception):
    """Too many failures from this client, or too many checks at once; retry later."""

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
        self._failures: OrderedDict[str, list[float]] = OrderedDict()
        self._refusals: OrderedDict[str, list[float]] = OrderedDict()
        # (address, user) pairs that logged in: never throttled by others' failures there.
        self._trusted: OrderedDict[tuple[str, str], None] = OrderedDict()
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
        users = self._current_users()
        stored = users.get(user)
        digest = hmac.new(self._key, b"\0".join([user.encode(), password.encode(),
                                                 stored or b""]), hashlib.sha256).digest()
        with self._lock:
            remembered = stored is not None and digest in self._verified
            trusted = (client, user) in self._trusted
        if remembered:
            self._trust(client, user)
            metrics.LOGINS.labels("ok").inc()
            return user
        if not trusted:
            self._refuse_if_failing(client)
        # Who pressed least lately goes first: an account nobody guesses at beats any
        # guesser, however many addresses the guessers rotate through; then a fresh address.
        account = _ACCOUNT + user
        priority = (0 if trusted else 1, self._pressure(account), self._pressure(client))
        try:
            with self._queue.slot(client, priority):
                ok = self._verify(password.encode()[:BCRYPT_MAX_BYTES], stored)
        except QueueFull as exc:
            metrics.LOGINS.labels("queue_full").inc()
            self._remember(self._refusals, client)
            self._remember(self._refusals, account)
            raise Throttled(str(exc), 1) from None
        if ok:
            with self._lock:
                if len(self._verified) >= _CACHE_LIMIT:
                    self._verified.clear()
                self._verified.add(digest)
            self._trust(client, user)
            metrics.LOGINS.labels("ok").inc()
            return user
        metrics.LOGINS.labels("failed").inc()
        self._record_failure(client)
        self._remember(self._failures, account)
        return None

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

    def _trust(self, client: str, user: str) -> None:
        with self._lock:
            self._trusted[(client, user)] = None
            self._trusted.move_to_end((client, user))
            while len(self._trusted) > _TRACKED_CLIENTS:
                self._trusted.popitem(last=False)

    def _pressure(self, client: str) -> int:
        """Failed checks and checks refused for want of a turn, from ``client`` (or for an
        account: ``_ACCOUNT`` + its name) lately."""
        now = time.monotonic()
        with self._lock:
            return sum(1 for events in (self._failures, self._refusals)
                       for t in events.get(client, ()) if now - t < self.failure_window)

    def _remember(self, events: OrderedDict[str, list[float]], client: str) -> int:
        """Note an event of ``client`` now; how many it has (bounded memory)."""
        now = time.monotonic()
        with self._lock:
            times = [t for t in events.get(client, ()) if now - t < self.failure_window]
            times.append(now)
            events[client] = times[-_EVENTS_PER_CLIENT:]
            events.move_to_end(client)
            while len(events) > _TRACKED_CLIENTS:
                events.popitem(last=False)
            return len(times)

    def _refuse_if_failing(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._failures.get(client, ()) if now - t < self.failure_window]
            if recent:
                self._failures[client] = recent
            else:
                self._failures.pop(client, None)
            if len(recent) >= self.max_failures:
                wait = int(self.failure_window - (now - recent[0])) + 1
                metrics.LOGINS.labels("throttled").inc()
                raise Throttled(f"{len(recent)} failed logins from this address", wait)

    def _record_failure(self, client: str) -> None:
        count = self._remember(self._failures, client)
        if count == self.max_failures:
            LOG.warning("%d failed logins from %s within %d s: refusing its logins for a "
                        "while", count, client or "an unknown address", self.failure_window)


def _cost(digest: bytes) -> int:
    match = _COST.match(digest)
    return int(match.group(1)) if match else 0


def _dummy_hash(users: dict[str, bytes]) -> bytes:
    """A bcrypt hash of a random password, as costly as the costliest of the users' hashes."""
    costs = [_cost(h) for h in users.values()]
    rounds = max(costs) if costs else 12
    return bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(max(4, min(rounds, 31))))
