"""The one writer: database reads -> desired state -> hostsdir.

The database is the only truth. A broadcast or a notification is a hint: it names MACs,
nodes or ports to look at. A deny in a hint is written at once (closing is always safe); every
other decision comes from a read of the database, applied in the order the reads were made:
one read-and-apply at a time (:meth:`FilterSync.full_sync` reads everything,
:meth:`FilterSync.reconcile_pending` the MACs, nodes and ports hinted since the last read),
so a stale sender can at worst cause a read, and order of arrival does not matter. A deny
written at once fences older reads: a read that started before it never reopens that MAC (it
is read again instead).

The database is read outside the hostsdir lock so a slow query never delays a deny; so are
the directory listing and the occasional re-read of every file's content: the lock is held
for set arithmetic and the writes themselves.
"""

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator

from pxe_filter import policy
from pxe_filter.common import macs
from pxe_filter.foreign_files import ForeignReport, remove_foreign
from pxe_filter.hostsdir import WILDCARD, HostsDir, WriteReport
from pxe_filter.source import Lookup, Source
from pxe_filter.sync_results import SyncResult

LOG = logging.getLogger(__name__)

#: The origins of the hints the daemon gives itself (not counted as broadcasts): the
#: change poll's, and the deny of a MAC dnsmasq leased although the database denies it.
POLL, LEASE = "Poll", "Lease check"
#: Seconds for which the time a MAC was closed is remembered (lease reports come within
#: seconds; a lease granted before the close is no violation).
CLOSED_MEMORY = 600.0


class HostsdirSwapped(Exception):
    """The configured hostsdir path no longer names the directory the daemon holds."""


class FilterSync:
    """Keeps one hostsdir in step with the database, hinted by messages. Thread-safe."""

    def __init__(self, source: Source, hostsdir_path: str,
                 settings: policy.Settings = policy.DEFAULTS, *,
                 should_stop: Callable[[], bool] = lambda: False) -> None:
        self.source = source
        self.hostsdir = HostsDir(hostsdir_path)
        #: The options verdicts follow (SIGHUP replaces them whole; the next read uses them).
        self.settings = settings
        self.should_stop = should_stop
        self._lock = threading.Lock()  # guards the hostsdir, the policy and the hints
        self._read_lock = threading.Lock()  # one read-and-apply at a time, in read order
        self._macs: set[str] = set()  # hinted, not read yet
        self._nodes: set[str] = set()
        self._ports: set[str] = set()
        self._closed: dict[str, int] = {}  # MAC -> generation of a deny written at once
        self._generation = 0
        self._reread_pending = False
        #: A full sync is wanted now (a deleted node's MACs are unknown to a lookup).
        self.full_sync_due = False
        #: Wall-clock time each MAC's file (or the wildcard) last went from serving to
        #: refusing (lease reports), by file name.
        self.closed_at: dict[str, float] = {}
        #: Called (without the lock) when hints wait to be read: wakes the writer loop.
        self.on_pending: Callable[[], None] = lambda: None
        #: Called with every hint's SyncResult, outside the lock (status, metrics,
        #: threshold reload).
        self.on_broadcast: Callable[[SyncResult], None] | None = None
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
        #: The policy the daemon holds (the database as last read); None before the first
        #: sync. Self-healing puts files back to it.
        self.desired: policy.DesiredState | None = None

    def reread_files(self) -> None:
        """Make the next full sync re-read the content of every file."""
        with self._lock:
            self._reread_pending = True

    def _reread_contents(self) -> int:
        """Re-read every managed file's content outside the lock; the number read.

        Catches in-place edits, which keep the inode and so escape the listing. Only the
        files found to differ from the cache are recorded, under the lock. Before the first
        scan the cache knows only the files the filter wrote itself since it started.
        """
        with self._lock:
            self._reread_pending = False
            names = self.hostsdir.managed_names()
        found = self.hostsdir.changed_contents(names)
        if found:
            with self._lock:
                self.hostsdir.apply_contents(found)
        return len(names)

    def _remove_foreign(self, names: set[str] | None = None) -> ForeignReport | None:
        """Remove the files we did not write (caller holds the lock); the report for
        :attr:`after_foreign`, to hand to :meth:`_reconcile` (None: nothing to tell)."""
        failing = bool(self.hostsdir.foreign_failed)
        report = remove_foreign(self.hostsdir, names)
        return report if report.reload_needed or report.failed or failing else None

    def _reconcile(self, names: Iterable[str] | None,
                   desired: policy.DesiredState | None = None, *, rewrite: bool = False,
                   should_stop: Callable[[], bool] = lambda: False,
                   noted: list[tuple[str, bool]] | None = None,
                   foreign: ForeignReport | None = None) -> WriteReport:
        """Write the files that differ from ``desired`` (default: the held policy), denies
        first, then tell the fail-safe (caller holds the lock). The files ``names`` (MACs, or
        the wildcard; ``rewrite``: even those that already say it),
        or every file (None: the changes are written as computed, 1M tuples at once would
        be ~70 MB at a first sync's peak). ``noted`` collects the changes. ``foreign`` (files
        removed before) is told after the writes: the reload it may bring must find the denies
        a removed file held (``mv <mac> <MAC>``) back in the MACs' own files."""
        desired = desired or self.desired
        if names is None:
            changes: Iterable[tuple[str, bool]] = \
                () if desired is None else self.hostsdir.changes(desired)
        else:
            assert desired is not None
            found = []
            for name in names:
                want = desired.decision(name)
                named = name == WILDCARD or name in desired.allow or name in desired.deny
                if rewrite or self._differs(name, want, named):
                    found.append((name, want))
            changes = sorted(found, key=lambda change: change[1])  # denies first
        report = self.hostsdir.write_all(self._noting_closes(changes, noted), should_stop,
                                         names is None)
        if self.after_writes is not None:
            self.after_writes(report, names is None)
        if foreign is not None and self.after_foreign is not None:
            self.after_foreign(foreign)
        return report

    def _noting_closes(self, changes: Iterable[tuple[str, bool]],
                       noted: list[tuple[str, bool]] | None) -> Iterator[tuple[str, bool]]:
        """``changes`` as they come (each added to ``noted``), noting when a served MAC is
        refused (lease checks; not before the first sync, whose closes follow a time the
        filter did not watch)."""
        now = time.time()
        if len(self.closed_at) > 10000:
            self.closed_at = {mac: at for mac, at in self.closed_at.items()
                              if at > now - CLOSED_MEMORY}
        watching = self.desired is not None
        for change in changes:
            name = change[0]
            if watching and not change[1] and self.hostsdir.state_of(name) is True:
                self.closed_at[name] = now
            if noted is not None:
                noted.append(change)
            yield change

    def write_deny_wildcard(self, reopen: bool = False) -> None:
        """Refuse unknown MACs now: at start-up, before the first sync, or (``reopen``) in
        the new or emptied directory now at the hostsdir path, held from now on; raises
        OSError."""
        with self._lock:
            if reopen:
                self.hostsdir.reopen()
                self.hostsdir.invalidate()
            self.hostsdir.ensure_reserve()
            self._reconcile([WILDCARD], policy.DesiredState())
            reason = self.hostsdir.unenforced.get(WILDCARD)
        if reason is not None:
            raise OSError(reason)

    # -- reads of the database, applied one at a time ---------------------------------
    def full_sync(self) -> SyncResult:
        """Bring every file in line with the database; raises DatabaseError or OSError.

        On a database error nothing is written. One file failing is counted in ``failed``
        and retried next time; the others are still written.
        """
        with self._read_lock:
            start = time.monotonic()
            with self._lock:  # hints wait for their own read: a lookup after this one
                generation = self._generation
                settings = self.settings
            snap = self.source.read_snapshot(settings.supported_interfaces, settings.scope)
            served_by = snap.served_by
            desired = policy.compute_split(snap.on_inspection, snap.others,
                                           settings.unknown_allowed(bool(snap.inspecting)))
            del snap
            desired.served_by = {node: {mac for mac in addresses if mac in desired.allow}
                                 for node, addresses in served_by.items()}
            result = SyncResult(unknown_allowed=desired.unknown_allowed, invalid=desired.invalid)
            if self._reread_pending:  # SIGHUP: in-place edits keep the inode
                result.reread = self._reread_contents()
            why = self.hostsdir.swapped()
            if why is not None:
                raise HostsdirSwapped(f"{self.hostsdir.path} is {why}")
            listing = self.hostsdir.list_entries()
            with self._lock:
                result.fenced = self._fence(desired, generation, None)
                self.hostsdir.scan(listing)
                del listing
                foreign = self._remove_foreign()
                self.hostsdir.ensure_reserve()
                report = self._reconcile(None, desired, should_stop=self.should_stop,
                                         foreign=foreign)
                result.reread += self.hostsdir.reread
                self.desired = desired
                result.reopened = self.closed_unknown is not None
                self.closed_unknown = None
                self.full_sync_due = False
        result.allowed, result.denied = len(desired.allow), len(desired.deny)
        result.written, result.failed = report.written, report.failed
        result.interrupted = report.interrupted
        result.held = report.held
        result.duration = time.monotonic() - start
        return result

    def _fence(self, desired: policy.DesiredState, generation: int,
               read: Collection[str] | None) -> int:
        """Keep denied every MAC closed at once after a read began (caller holds the lock);
        such MACs are read again. Forget the fences the read covered (``read``: the MACs
        it read; None: all). How many MACs the fence kept closed."""
        kept = 0
        for mac, closed in list(self._closed.items()):
            if closed > generation:
                desired.set(mac, False)
                self._macs.add(mac)
                kept += 1
            elif read is None or mac in read:
                del self._closed[mac]
        return kept

    @property
    def pending(self) -> bool:
        """Hints wait to be read."""
        return bool(self._macs or self._nodes or self._ports)

    def hint(self, allow: Iterable[object] | None = None, deny: Iterable[object] | None = None,
             *, nodes: Collection[str] = (), ports: Collection[str] = (),
             origin: str = "Broadcast", rewrite: bool = False) -> SyncResult:
        """Take a broadcast's or a notification's hint: denies are written now (``rewrite``:
        even files that already deny, for dnsmasq to read them again), everything else
        waits for :meth:`reconcile_pending` to read the database.

        Invalid entries (and a non-list argument) are logged, counted in ``rejected`` and
        skipped; the valid ones are still taken. A MAC in both lists is denied.
        """
        good_allow, bad_allow = macs.split_valid(allow)
        good_deny, bad_deny = macs.split_valid(deny)
        result = SyncResult(rejected=len(bad_allow) + len(bad_deny))
        if result.rejected:
            # One line however many: a broadcast of 100,000 bad entries must not flood.
            bad = [_describe_invalid(v) for v in (*bad_allow, *bad_deny)[:3]]
            LOG.warning("%s: rejected %s", origin,
                        macs.summary(result.rejected, bad, "invalid entr(y/ies)"))
        denied = set(good_deny)
        with self._lock:
            self._generation += 1  # fences older reads
            desired = self.desired or policy.DesiredState()  # before the first sync: these
            for mac in denied:
                self._closed[mac] = self._generation
                desired.set(mac, False)
            report = self._reconcile(denied, desired, rewrite=rewrite) if denied \
                else WriteReport()
            self._macs.update(good_allow, denied)
            self._nodes.update(nodes)
            self._ports.update(ports)
            waiting = self.pending
        result.allowed = len(set(good_allow) - denied)
        result.denied = len(denied)
        result.written, result.failed = report.written, report.failed
        if waiting:
            self.on_pending()
        if denied or result.rejected:
            LOG.info("%s: %d MAC(s) denied at once (%d file(s) written, %d failed), %d "
                     "allow(s) to confirm with the database, %d rejected", origin,
                     result.denied, result.written, result.failed, result.allowed,
                     result.rejected)
        LOG.debug("%s: deny %s, look up %s, nodes %s, ports %s", origin, sorted(denied),
                  sorted(good_allow), sorted(nodes)[:10], sorted(ports)[:10])
        if self.on_broadcast is not None and origin not in (POLL, LEASE):  # a message
            self.on_broadcast(result)
        return result

    def reconcile_pending(self, macs: Collection[str] = ()) -> SyncResult | None:
        """Read the hinted MACs, nodes and ports (and ``macs``) from the database and write
        what it says; None if nothing was hinted or before the first sync. Raises
        DatabaseError (the hints stay queued)."""
        with self._read_lock:
            with self._lock:
                self._macs.update(macs)
                if self.desired is None or not self.pending:
                    return None
                generation = self._generation
                settings = self.settings
                wanted, nodes, ports = self._macs, self._nodes, self._ports
                self._macs, self._nodes, self._ports = set(), set(), set()
                held = {node: set(self.desired.served_by[node]) for node in nodes
                        if node in self.desired.served_by}
            try:
                found = self.source.lookup(
                    wanted, nodes, ports, supported_interfaces=settings.supported_interfaces,
                    scope=settings.scope, held=held)
            except Exception:
                with self._lock:  # read again next time
                    self._macs |= wanted
                    self._nodes |= nodes
                    self._ports |= ports
                raise
            with self._lock:
                result = self._apply_lookup(found, wanted, generation, settings)
        LOG.info("Database read for %d MAC(s), %d node(s), %d port(s): %d allowed, %d "
                 "denied, %d left to the wildcard; %d file(s) written, %d failed",
                 len(wanted), len(nodes), len(ports), result.allowed, result.denied,
                 result.unknown, result.written, result.failed)
        return result

    def _apply_lookup(self, found: Lookup, wanted: set[str], generation: int,
                      settings: policy.Settings) -> SyncResult:
        """Update the held policy with what the database said; write the files that differ
        (caller holds the lock)."""
        desired = self.desired
        assert desired is not None
        result = SyncResult(ports=found.ports)
        if found.missing_nodes:
            self.full_sync_due = True  # a deleted node's MACs: only a full read knows them
        desired.unknown_allowed = self.closed_unknown is None \
            and settings.unknown_allowed(found.any_served)
        desired.served_by.update(found.served_nodes)
        for node in found.unserved_nodes:
            desired.served_by.pop(node, None)
        read = wanted | found.asked | set(found.ports)
        for mac in read:
            allow = settings.verdict(found.ports[mac]) if mac in found.ports else None
            if allow is None:
                desired.forget(mac)  # no port here: the unknown-MAC policy decides
                result.unknown += 1
                continue
            desired.set(mac, allow)
            if allow:
                result.allowed += 1
                node = found.ports[mac].node_uuid
                if node:  # a port hinted on its own: its node must re-check it on leaving
                    desired.served_by.setdefault(node, set()).add(mac)
            else:
                result.denied += 1
        self._fence(desired, generation, read)
        report = self._reconcile(read | {WILDCARD})
        result.written, result.failed = report.written, report.failed
        return result

    def _differs(self, name: str, want: bool, named: bool) -> bool:
        """Whether file ``name`` must be written to say ``want``: it says something else, or
        is no longer the file the cache describes (a cheap lstat). A MAC the database does
        not name needs no file of its own: the wildcard decides for it."""
        ino, state = self.hostsdir.inodes.get(name), self.hostsdir.state_of(name)
        if ino is None:
            return named or state is not None
        if state is not want:
            return True
        try:
            return self.hostsdir.lstat(name).st_ino != ino
        except OSError:
            return True

    def close_unknown(self, why: str) -> bool:
        """Deny MACs of no port until the next full sync (the database does not answer);
        known MACs keep their verdict. True if a file was rewritten."""
        with self._lock:
            self.closed_unknown = why
            if self.desired is None or not self.desired.unknown_allowed:
                return False
            self.desired.unknown_allowed = False
            return bool(self._reconcile([WILDCARD]).written)

    def figures(self) -> tuple[int, int, bool | None]:
        """(allowed, denied, unknown allowed) of the held policy (None before a sync)."""
        desired = self.desired
        if desired is None:
            return 0, 0, None
        return len(desired.allow), len(desired.deny), desired.unknown_allowed


    # -- self-healing (pxe_filter.selfheal drives these) -------------------------------
    def repair(self, names: Iterable[str], content_changed: Collection[str] = ()) -> list[str]:
        """Put files changed by someone else back to the held policy; the repaired names.

        ``names`` had directory events; those in ``content_changed`` were written in place
        (their inode says nothing). Our own writes are recognised by the inode we recorded
        when renaming them into place, deletions of ours by the name being forgotten.
        """
        changed: list[str] = []
        with self._lock:
            desired = self.desired
            if desired is None:
                return []
            foreign = {name for name in names if self.hostsdir.seen_foreign(name)}
            for name in names:
                why = self.hostsdir.foreign_change(name, name in content_changed,
                                                   desired.decision)
                if why is None:
                    continue
                changed.append(name)
                LOG.warning("%s was %s by someone else: restored to %s",
                            os.path.join(self.hostsdir.path, name), why,
                            "allow" if desired.decision(name) else "deny")
            if changed or foreign:  # even a deleted file of a MAC the wildcard decides for
                self._reconcile(changed, rewrite=True,
                                foreign=self._remove_foreign(foreign) if foreign else None)
            return [name for name in changed
                    if self.hostsdir.state_of(name) is desired.decision(name)]

    def converge(self, *, failing_only: bool = False, reread: bool = False,
                 reopen: bool = False) -> list[str] | None:
        """Write every file that differs from the held policy, with no database read: while
        writes fail (``failing_only``: None if none does), after an inotify overflow
        (``reread`` every file first), or into the new or emptied directory now at the
        hostsdir path (``reopen``, held from now on). The names written; raises OSError.

        Listing and re-reading run outside the lock, as in a full sync: a foreign burst that
        overflowed the queue must not hold up denies for a full re-read.
        """
        with self._read_lock:
            if reopen:
                self.write_deny_wildcard(reopen=True)  # in the new directory first
            if reread and self.desired is not None:
                self._reread_contents()
            listing = None if reopen else self.hostsdir.list_entries()
            with self._lock:
                if failing_only and (self.desired is None or not self.hostsdir.failing):
                    return None
                changes = [(WILDCARD, False)] if reopen else []
                self.hostsdir.scan(listing)
                foreign = self._remove_foreign()
                self.hostsdir.ensure_reserve()
                self._reconcile(None, noted=changes, foreign=foreign)
                for name, want in changes if reread else ():
                    LOG.warning("%s differs from the policy: restored to %s",
                                os.path.join(self.hostsdir.path, name),
                                "allow" if want else "deny")
                return [name for name, _ in changes]

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
            stale = self.hostsdir.stale_files(self.desired, set(self._closed))
            removed = self.hostsdir.remove(stale)
            if not removed:
                return 0
            try:
                reload()
            except Exception:
                self._reconcile(removed, rewrite=True)
                raise
            LOG.info("Purged %d file(s) of MACs without a port; dnsmasq reloaded",
                     len(removed))
            return len(removed)


def _describe_invalid(value: object) -> str:
    if isinstance(value, str):
        return str(macs.InvalidMAC(value))
    shown = repr(value)
    return f"non-MAC value {shown[:61] + '...' if len(shown) > 64 else shown} " \
           f"(expected a list of MAC strings)"
