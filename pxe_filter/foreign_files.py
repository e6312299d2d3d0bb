"""Files in the hostsdir that the filter did not write: removed, or else neutralised.

dnsmasq reads every regular file of its ``--dhcp-hostsdir`` whatever its name (only dotfiles,
``name~`` and ``#name#`` are skipped, and we remove those too): a ``zz-extra`` holding a denied
MAC, a ``zz-all`` holding ``*:*:*:*:*:*`` or a ``MAC.bak`` copy would serve what the database
denies. So every entry that is not a dotfile, a MAC file or the wildcard is deleted. One that
cannot be deleted is emptied in place (an empty file says nothing to dnsmasq once it re-reads
the directory); one that cannot be emptied either is reported as failed, and the fail-safe
stops dnsmasq until it is gone. dnsmasq keeps a deleted or emptied file's entries until
SIGHUP, so whoever calls :func:`remove_foreign` must reload dnsmasq when anything was removed.
"""

import os
import stat
from dataclasses import dataclass, field

from pxe_filter.hostsdir import HostsDir, overwrite


@dataclass
class ForeignReport:
    """What one pass did with the foreign entries (names relative to the hostsdir)."""

    removed: list[str] = field(default_factory=list)
    #: Could not be deleted, emptied in place instead.
    neutralised: list[str] = field(default_factory=list)
    #: Deleted by someone else after we saw them: dnsmasq may still apply them.
    gone: list[str] = field(default_factory=list)
    #: Neither deleted nor emptied: name -> why. Only stopping dnsmasq helps then.
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def reload_needed(self) -> bool:
        """dnsmasq may still apply an entry that is no longer on disk."""
        return bool(self.removed or self.neutralised or self.gone)


def remove_foreign(hd: HostsDir, names: set[str] | None = None) -> ForeignReport:
    """Delete (else empty) the foreign entries the cache found, or only ``names`` of them.

    The caller holds the hostsdir lock. Directories are left alone: dnsmasq reads none.
    """
    report = ForeignReport(gone=sorted(hd.foreign_gone))
    hd.foreign_gone.clear()
    for name in sorted(hd.foreign if names is None else names & hd.foreign):
        try:
            st = hd.lstat(name)
        except FileNotFoundError:
            hd.drop(name)
            report.gone.append(name)
            continue
        except OSError as exc:
            report.failed[name] = exc.strerror or str(exc)
            continue
        if stat.S_ISDIR(st.st_mode):
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size == 0 and hd.neutral.get(name) == st.st_ino:
            continue  # emptied by us before and still empty: nothing new for dnsmasq
        try:
            os.unlink(name, dir_fd=hd.dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if overwrite(name, b"", hd.dir_fd) is not None:  # empty: says nothing to dnsmasq
                hd.neutral[name] = st.st_ino
                report.neutralised.append(name)
            else:
                report.failed[name] = exc.strerror or str(exc)
            continue
        hd.drop(name)
        report.removed.append(name)
    hd.foreign_failed = report.failed if names is None else \
        {**{n: w for n, w in hd.foreign_failed.items() if n not in names}, **report.failed}
    return report

