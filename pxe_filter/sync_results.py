"""What one full sync, one hint and one lookup did: the figures logs, status and metrics report."""

from dataclasses import dataclass


@dataclass
class SyncResult:
    """Outcome of one full sync."""

    allowed: int = 0
    denied: int = 0
    written: int = 0
    failed: int = 0
    unknown_allowed: bool = False
    duration: float = 0.0
    invalid: int = 0
    reread: int = 0
    fenced: int = 0  # MACs denied since the read began, kept denied and read again
    interrupted: bool = False
    purged: int = 0
    held: int = 0
    reopened: bool = False  # unknown MACs were closed by a database outage until now

    def summary(self) -> str:
        """One log-friendly line."""
        unknown = "allowed" if self.unknown_allowed else "denied"
        if self.held:
            unknown = "denied (allowed by the policy, held until every denial is written)"
        return (f"{self.allowed} allowed, {self.denied} denied, unknown MACs "
                f"{unknown}; {self.written} file(s) "
                f"written, {self.failed} failed, {self.reread} read, {self.invalid} invalid "
                f"MAC(s) in the database; {self.duration:.3f} s")


@dataclass
class BroadcastResult:
    """Outcome of one hint (denies written at once) or of the database read it led to."""

    allowed: int = 0
    denied: int = 0
    rejected: int = 0
    written: int = 0
    failed: int = 0
    unknown: int = 0  # MACs the database has no port for: left to the wildcard
