"""The loop body: database snapshot -> desired state -> hostsdir, and broadcasts in between.

Broadcasts and syncs are serialised by one lock, but the database is read outside it so a
slow query never delays a broadcast. Neither do the directory listing and the occasional
re-read of every file's content: both run outside the lock and are reconciled under it, so
the lock is held for set arithmetic and the writes themselves. Each broadcast gets a sequence
number; a sync remembers the number current when its snapshot was taken and keeps every
broadcast decision made after it, so an older snapshot never undoes a newer broadcast.
"""

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable

from pxe_filter import policy, scope_check
from pxe_filter.common import macs
from pxe_filter.foreign_files import ForeignReport, remove_foreign
from pxe_filter.hostsdir import WILDCARD, WILDCARD_MAC, HostsDir, Listing, WriteReport
from pxe_filter.source import Source
from pxe_filter.sync_results import BroadcastResult, SyncResult

LOG = logging.getLogger(__name__)

#: Re-read every file's content this often (in syncs), to catch in-place edits by others
#: that keep the inode; everything else is detected from directory entries alone.
FULL_READ_EVERY = 100


class HostsdirSwapped(Exception):
    """The configured hostsdir path no longer names the directory the daemon holds."""


class FilterSync:
    """Keeps one hostsdir in step with the database and with broadcasts. Thread-safe."""

    def __init__(self, source: Source, hostsdir_path: str, *,
                 supported_interfaces: Collection[str] = ("agent",),
                 discovery_enabled: bool = False, deny_unknown_macs: bool = False,
                 scope: policy.Scope = policy.UNSCOPED,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        self.source = source
        self.hostsdir = HostsDir(hostsdir_path)
        self.supported_interfaces = frozenset(supported_interfaces)
        self.scope = scope
        self.discovery_enabled = discovery_enabled
        self.deny_unknown_macs = deny_unknown_macs
        self.should_stop = should_stop
        self._lock = threading.Lock()  # guards the hostsdir and the broadcast record
        self._sync_lock = threading.Lock()  # one full sync at a time (snapshot order)
        self._seq = 0
        self._broadcasts: dict[str, tuple[int, bool]] = {}  # MAC -> (seq, allow)
        self._unknown: tuple[int, bool] | None = None  # (seq, allowed) set between syncs
        self._syncs = 0
        self._reread_pending = False
        #: Called with every BroadcastResult, outside the lock (status, threshold reload).
        self.on_broadcast: Callable[[BroadcastResult], None] | None = None
        #: Called under the lock after every batch of writes, with whether the batch
        #: covered the whole policy (the fail-safe: reloads or stops dnsmasq when a denial
        #: is not on disk, starts it again once every denial is).
        self.after_writes: Callable[[WriteReport, bool], None] | None = None
        #: Why unknown MACs are closed whatever the policy says (a long database
        #: outage); None when the last sync's policy stands. Cleared by a full sync.
        self.closed_unknown: str | None = None
        #: Called under the lock when files the filter did not write were removed or could
        #: not be (the daemon logs, counts, and reloads or stops dnsmasq).
        self.after_foreign: Callable[[ForeignReport], None] | None = None
        #: The policy the daemon holds (last sync plus later broadcasts); None before the
        #: first sync. Self-healing puts files back to it.
        self.desired: policy.DesiredState | None = None

    def configure(self, *, supported_interfaces: Collection[str], discovery_enabled: bool,
                  deny_unknown_macs: bool, scope: policy.Scope = policy.UNSCOPED) -> None:
        """Apply re-read options (SIGHUP); broadcasts use them now, the next full sync too."""
        with self._lock:
            self.supported_interfaces = frozenset(supported_interfaces)
            self.scope = scope
            self.discovery_enabled = discovery_enabled
            self.deny_unknown_macs = deny_unknown_macs

    def reread_files(self) -> None:
        """Make the next full sync re-read the content of every file."""
        with self._lock:
            self._reread_pending = True

    def _reread_contents(self) -> int:
        """Re-read every managed file's content outside the lock; the number read.

        Catches in-place edits, which keep the inode and so escape the listing. Only the
        files found to differ from the cache are recorded, under the lock.
        """
        with self._lock:
            self._reread_pending = False
            if not self.hostsdir.loaded:
                return 0  # the first scan reads everything anyway
            names = self.hostsdir.managed_names()
        found = self.hostsdir.changed_contents(names)
        if found:
            with self._lock:
                self.hostsdir.apply_contents(found)
        return len(names)

    def _remove_foreign(self, names: set[str] | None = None) -> int:
        """Remove the files we did not write (caller holds the lock); how many went."""
        failing = bool(self.hostsdir.foreign_failed)
        report = remove_foreign(self.hostsdir, names)
        if (report.reload_needed or report.failed or failing) and self.after_foreign:
            self.after_foreign(report)
        return len(report.removed) + len(report.neutralised)

    def _write(self, changes: Iterable[tuple[str, str, bool]], full: bool = False,
               should_stop: Callable[[], bool] = lambda: False) -> WriteReport:
        """Write ``changes`` (caller holds the lock), then tell the fail-safe."""
        report = self.hostsdir.write_all(changes, should_stop, full)
        if self.after_writes is not None:
            self.after_writes(report, full)
        return report

    def write_deny_wildcard(self) -> None:
        """Refuse unknown MACs now (start-up, before the first sync); raises OSError."""
        with self._lock:
            self.hostsdir.ensure_reserve()
            self._write([(WILDCARD, WILDCARD_MAC, False)])
            reason = self.hostsdir.unenforced.get(WILDCARD)
        if reason is not None:
            raise OSError(reason)

    def full_sync(self) -> SyncResult:
        """Bring every file in line with the database; raises DatabaseError or OSError.

        On a database error nothing is written. One file failing is counted in ``failed``
        and retried next time; the others are still written.
        """
        with self._sync_lock:
            return self._full_sync()

    def _full_sync(self) -> SyncResult:
        start = time.monotonic()
        with self._lock:
            snapshot_seq = self._seq
            interfaces, scope = self.supported_interfaces, self.scope
            discovery, deny_unknown = self.discovery_enabled, self.deny_unknown_macs
        snap = self.source.read_snapshot(interfaces, scope)
        desired = policy.compute_split(snap.on_inspection, snap.others,
                                       bool(snap.inspecting), discovery_enabled=discovery,
                                       deny_unknown_macs=deny_unknown)
        del snap
        result = SyncResult(unknown_allowed=desired.unknown_allowed, invalid=desired.invalid)
        self._syncs += 1
        if self._reread_pending or self._syncs % FULL_READ_EVERY == 0:
            result.reread = self._reread_contents()
        why = self.hostsdir.swapped()
        if why is not None:
            raise HostsdirSwapped(f"{self.hostsdir.path} is {why}")
        listing = self.hostsdir.list_entries()
        with self._lock:
            kept = self._merge_broadcasts(desired, snapshot_seq)
            self.hostsdir.scan(listing)
            del listing
            result.foreign = self._remove_foreign()
            self.hostsdir.ensure_reserve()
            # written as computed: 1M tuples at once would be ~70 MB at a first sync's peak
            report = self._write(self.hostsdir.iter_changes(desired), True, self.should_stop)
            result.reread += self.hostsdir.reread
            self.desired = desired
            result.reopened = self.closed_unknown is not None
            self.closed_unknown = None
        result.allowed, result.denied = len(desired.allow), len(desired.deny)
        result.written, result.failed = report.written, report.failed
        result.kept_broadcasts, result.interrupted = kept, report.interrupted
        result.held = report.held
        result.duration = time.monotonic() - start
        return result

    def _merge_broadcasts(self, desired: policy.DesiredState, snapshot_seq: int) -> int:
        """Overlay broadcasts newer than the snapshot; forget the older ones."""
        if self._unknown is not None:
            seq, allowed = self._unknown
            if seq > snapshot_seq:
                desired.unknown_allowed = allowed
            else:
                self._unknown = None
        kept = 0
        for mac, (seq, allow) in list(self._broadcasts.items()):
            if seq > snapshot_seq:
                desired.set(mac, allow)
                kept += 1
            else:
                del self._broadcasts[mac]
        return kept

    def apply_broadcast(self, allow: Iterable[object] | None = None,
                        deny: Iterable[object] | None = None,
                        origin: str = "Broadcast", in_scope: bool = False) -> BroadcastResult:
        """Validate and normalise the MACs, then write their files; a MAC in both is denied.

        Invalid entries (and a non-list argument) are logged, counted in ``rejected`` and
        skipped; the valid ones are still applied. A scoped filter checks the allows against
        the database first (:mod:`pxe_filter.scope_check`) unless ``in_scope`` (the caller
        decided them from database rows with the same scope).
        """
        good_allow, bad_allow = macs.split_valid(allow)
        good_deny, bad_deny = macs.split_valid(deny)
        result = BroadcastResult(rejected=len(bad_allow) + len(bad_deny))
        if result.rejected:
            # One line however many: a broadcast of 100,000 bad entries must not flood.
            bad = [_describe_invalid(v) for v in (*bad_allow, *bad_deny)[:3]]
            LOG.warning("%s: rejected %s", origin,
                        macs.summary(result.rejected, bad, "invalid entr(y/ies)"))
        if not in_scope:
            good_allow, good_deny = scope_check.screen(self.source, self.scope, good_allow,
                                                       good_deny, origin)
        wanted = policy.merge_lists(good_allow, good_deny)
        with self._lock:
            self._seq += 1
            changes = []
            for mac, want in wanted.items():
                self._broadcasts[mac] = (self._seq, want)
                if self.desired is not None:
                    self.desired.set(mac, want)
                for name in self.hostsdir.names_for(mac):
                    if (not self.hostsdir.loaded or self.hostsdir.state_of(name) is not want
                            or not _same_file(self.hostsdir, name)):
                        changes.append((name, mac, want))
            changes.sort(key=lambda item: item[2])
            report = self._write(changes)
        result.allowed = sum(wanted.values())
        result.denied = len(wanted) - result.allowed
        result.written, result.failed = report.written, report.failed
        if wanted or result.rejected:
            LOG.info("%s applied: %d allowed, %d denied, %d rejected; %d file(s) "
                     "written, %d failed", origin, result.allowed, result.denied,
                     result.rejected, result.written, result.failed)
            LOG.debug("Broadcast allowed %s, denied %s",
                      sorted(m for m, a in wanted.items() if a),
                      sorted(m for m, a in wanted.items() if not a))
        if self.on_broadcast is not None:
            self.on_broadcast(result)
        return result

    def close_unknown(self, why: str) -> bool:
        """Deny MACs of no port until the next full sync (the database does not answer);
        known MACs keep their verdict. True if a file was rewritten."""
        with self._lock:
            self.closed_unknown = why
            self._unknown = None
            if self.desired is None or not self.desired.unknown_allowed:
                return False
            self.desired.unknown_allowed = False
            return bool(self._write(self.hostsdir.changes(self.desired)).written)

    def follow_unknown(self, any_served: bool) -> bool:
        """Between syncs: serve unknown MACs iff the policy says so now that ``any_served``
        (a node's ports are served) changed; True if the wildcard file was rewritten."""
        with self._lock:
            if self.desired is None:
                return False
            allowed = policy.unknown_allowed(any_served, discovery_enabled=self.discovery_enabled,
                                             deny_unknown_macs=self.deny_unknown_macs)
            if self.closed_unknown is not None:
                allowed = False  # a database outage closed them: the next sync decides
            self._seq += 1
            self._unknown = (self._seq, allowed)
            if allowed == self.desired.unknown_allowed:
                return False
            self.desired.unknown_allowed = allowed
            self._write([(WILDCARD, WILDCARD_MAC, allowed)])
        LOG.info("Unknown MACs now %s: %s", "allowed" if allowed else "denied",
                 "a node is on inspection" if any_served else "no node is on inspection")
        return True

    def figures(self) -> tuple[int, int, bool | None]:
        """(allowed, denied, unknown allowed) of the held policy (None before a sync)."""
        desired = self.desired
        if desired is None:
            return 0, 0, None
        return len(desired.allow), len(desired.deny), desired.unknown_allowed


    # -- self-healing (pxe_filter.selfheal drives these) -------------------------------
    def repair(self, names: Iterable[str], content_changed: Collection[str] = (),
               wait: bool = True) -> list[str] | None:
        """Put files changed by someone else back to the held policy; the repaired names.

        ``names`` had directory events; those in ``content_changed`` were written in place
        (their inode says nothing). Our own writes are recognised by the inode we recorded
        when renaming them into place, deletions of ours by the name being forgotten.
        Without ``wait``, returns None at once if a sync or broadcast holds the hostsdir.
        """
        repaired: list[str] = []
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            if self.desired is None:
                return repaired
            foreign = {name for name in names if self.hostsdir.seen_foreign(name)}
            if foreign:
                self._remove_foreign(foreign)
            for name in names:
                if name.startswith(".") or name in foreign:
                    continue
                found = self.hostsdir.foreign_change(name, name in content_changed,
                                                     self._want)
                if found is None:
                    continue
                why, mac = found
                want = self._want(name, mac)
                LOG.warning("%s was %s by someone else: restored to %s",
                            os.path.join(self.hostsdir.path, name), why,
                            "allow" if want else "deny")
                if self._write([(name, mac, want)]).written:
                    repaired.append(name)
        finally:
            self._lock.release()
        return repaired

    def _want(self, name: str, mac: str) -> bool:
        assert self.desired is not None
        return self.desired.unknown_allowed if name == WILDCARD else self.desired.decision(mac)

    def retry_failed(self) -> WriteReport | None:
        """While files fail: list the directory and write what differs from the held policy
        (no database read); None if nothing is failing."""
        with self._sync_lock, self._lock:
            if self.desired is None or not self.hostsdir.failing:
                return None
            self.hostsdir.scan()
            self._remove_foreign()
            self.hostsdir.ensure_reserve()
            return self._write(self.hostsdir.changes(self.desired), True)

    def recheck_all(self) -> list[str]:
        """Re-read every file and repair the differences (inotify queue overflow).

        Reads and lists outside the lock (as a full sync does): a foreign burst that
        overflowed the queue must not hold up broadcasts for a full re-read.
        """
        with self._sync_lock:
            if self.desired is None:
                return []
            self._reread_contents()
            listing = self.hostsdir.list_entries()
            with self._lock:
                return self._repair_all(listing)

    def _repair_all(self, listing: Listing) -> list[str]:
        assert self.desired is not None
        self.hostsdir.scan(listing)
        self._remove_foreign()
        changes = self.hostsdir.changes(self.desired)
        if changes:
            for name, _mac, want in changes:
                LOG.warning("%s differs from the policy: restored to %s",
                            os.path.join(self.hostsdir.path, name), "allow" if want else "deny")
        self._write(changes, True)
        return [name for name, _, _ in changes]

    def restore_directory(self) -> int:
        """Rewrite every file of the held policy into the new or emptied directory now at
        the hostsdir path (held from now on); raises OSError."""
        with self._sync_lock, self._lock:
            self.hostsdir.reopen()
            self.hostsdir.invalidate()
            self.hostsdir.write(WILDCARD, WILDCARD_MAC, False)
            self.hostsdir.ensure_reserve()
            self.hostsdir.scan()
            self._remove_foreign()
            if self.desired is None:
                return 1
            report = self._write(self.hostsdir.changes(self.desired), True)
            return report.written + 1

    def purge_stale(self, reload: Callable[[], object]) -> int:
        """Delete files of MACs no port has any more, then reload dnsmasq at once.

        Only files whose content already equals the wildcard's decision are deleted: until
        dnsmasq's SIGHUP its memory keeps the deleted line, which then says the same as the
        wildcard. If the reload raises, the files are written back (a deleted allow must not
        outlive a later wildcard change in dnsmasq's memory) and the error propagates.
        """
        with self._lock:
            if self.desired is None:
                return 0
            stale = self.hostsdir.stale_files(self.desired, set(self._broadcasts))
            removed = self.hostsdir.remove(stale)
            if not removed:
                return 0
            try:
                reload()
            except Exception:
                self._write([(name, mac, self.desired.unknown_allowed)
                             for name, mac in removed])
                raise
            LOG.info("Purged %d file(s) of MACs without a port; dnsmasq reloaded",
                     len(removed))
            return len(removed)


def _same_file(hostsdir: HostsDir, name: str) -> bool:
    """True if file ``name`` is still the one the cache describes (cheap lstat)."""
    ino = hostsdir.inode_of(name)
    if ino is None:
        return False
    try:
        return hostsdir.lstat(name).st_ino == ino
    except OSError:
        return False


def _describe_invalid(value: object) -> str:
    if isinstance(value, str):
        return str(macs.InvalidMAC(value))
    shown = repr(value)
    return f"non-MAC value {shown[:61] + '...' if len(shown) > 64 else shown} " \
           f"(expected a list of MAC strings)"
