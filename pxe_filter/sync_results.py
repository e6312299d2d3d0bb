"""What one full sync, one hint and one lookup did: the figures logs, status and metrics report."""

from dataclasses import dataclass, field

from pxe_filter.source import PortView


@dataclass
class SyncResult:
    """Outcome of one full sync, of one hint (its denies written at once) or of the database
    read a hint led to: MACs allowed and denied (by the policy after a full sync, by the
    hint or the read otherwise), files written and failed."""

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
    rejected: int = 0  # invalid entries of a hint
    unknown: int = 0  # MACs a read found no port for: left to the wildcard
    #: The ports a read found, by MAC (a lease check names their nodes).
    ports: dict[str, PortView] = field(default_factory=dict)

    def summary(self) -> str:
        """One log-friendly line (of a full sync)."""
        unknown = "allowed" if self.unknown_allowed else "denied"
        if self.held:
            unknown = "denied (allowed by the policy, held until every denial is written)"
        return (f"{self.allowed} allowed, {self.denied} denied, unknown MACs "
                f"{unknown}; {self.written} file(s) "
                f"written, {self.failed} failed, {self.reread} read, {self.invalid} invalid "
                f"MAC(s) in the database; {self.duration:.3f} s")
