"""The hostsdir lock: one daemon per hostsdir, for its whole lifetime."""

import contextlib
import fcntl
import os

from pxe_filter.checks import FatalError

LOCK_NAME = ".ironic-pxe-filter.lock"


class HostsdirLock:
    """An flock on a dotfile in the hostsdir, held for the daemon's lifetime.

    With ``dir_fd`` (the hostsdir held open) the file is opened relative to it.
    """

    def __init__(self, hostsdir: str, dir_fd: int | None = None) -> None:
        self.path = os.path.join(hostsdir, LOCK_NAME)
        self.hostsdir = hostsdir
        self.dir_fd = dir_fd
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise FatalError naming the daemon that holds it."""
        # The lock is held on a read-only descriptor: one open for writing for the
        # daemon's lifetime would keep the file system from being remounted read-only.
        try:
            fd = self._open(os.O_RDONLY | os.O_CREAT)
        except OSError as exc:
            raise FatalError(f"cannot open lock file {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise FatalError(f"another ironic-pxe-filter (pid {owner}) already manages "
                             f"{self.hostsdir} (lock {self.path}): stop it, or give this one "
                             f"its own [pxe_filter]dhcp_hostsdir") from None
        self.fd = fd
        self._set_owner(f"{os.getpid()}\n".encode())

    def _open(self, flags: int) -> int:
        return os.open(LOCK_NAME if self.dir_fd is not None else self.path,
                       flags | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644, dir_fd=self.dir_fd)

    def _set_owner(self, data: bytes) -> None:
        """Write the owner's pid (or nothing) into the lock file; best effort."""
        with contextlib.suppress(OSError):
            fd = self._open(os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    def release(self) -> None:
        """Release the lock (the file stays: removing it would race with a new owner)."""
        if self.fd is not None:
            self._set_owner(b"")
            os.close(self.fd)
            self.fd = None
