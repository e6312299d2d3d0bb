"""Reading Redfish documents safely: a walker that follows links (each document fetched once,
collections bounded, resources the BMC lacks recorded) and type-checked value helpers.

BMC documents are untrusted: a value of the wrong type counts as absent, and text is bounded.
"""

import logging
from collections.abc import Callable, Iterator
from typing import Any

LOG = logging.getLogger(__name__)

#: Most members read from one collection: a BMC listing more is cut there (logged).
MAX_MEMBERS = 256

#: Longest text kept from a BMC document.
MAX_TEXT = 1024

#: Fetches one resource's JSON by its path; raises :class:`MissingResource` when the BMC has
#: no such resource, BmcError (naming the path) on any other failure.
Getter = Callable[[str], dict]


class MissingResource(Exception):
    """The BMC links to a resource it does not serve (HTTP 404 or 501)."""


def text(value: Any) -> str | None:
    """A non-empty string (bounded), else None."""
    return value.strip()[:MAX_TEXT] or None if isinstance(value, str) else None


def integer(value: Any) -> int | None:
    """An int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def hex_id(value: Any) -> str | None:
    """``0x8086`` -> ``8086`` (the form IPA reports PCI ids in)."""
    raw = text(value)
    if raw is None:
        return None
    raw = raw.lower().removeprefix("0x")
    return raw if raw and all(c in "0123456789abcdef" for c in raw) else None


def state(doc: dict) -> str | None:
    """The document's ``Status.State``."""
    status = doc.get("Status")
    return status.get("State") if isinstance(status, dict) else None


def present(doc: dict) -> bool:
    """Whether the resource is there and enabled (no status counts as present)."""
    return state(doc) not in ("Absent", "Disabled", "UnavailableOffline")


def link_path(value: Any) -> str | None:
    """The path of a ``{"@odata.id": ...}`` link, without its fragment."""
    path = value.get("@odata.id") if isinstance(value, dict) else None
    return path.split("#", 1)[0] if isinstance(path, str) and path.startswith("/") else None


def put(target: dict, key: str, value: Any) -> None:
    """``target[key] = value`` unless the value is None or empty."""
    if value is not None and value not in ([], {}):
        target[key] = value


class Walker:
    """Follows the links of one BMC; every document is fetched once."""

    def __init__(self, get: Getter) -> None:
        self._get = get
        self._seen: dict[str, dict | None] = {}
        #: Linked resources the BMC does not serve: what they would say stays absent.
        self.missing: list[str] = []

    def doc(self, link: Any) -> dict | None:
        """The document ``link`` points to; None without a link or when the BMC lacks it."""
        path = link_path(link)
        if path is None:
            return None
        if path not in self._seen:
            try:
                body = self._get(path)
            except MissingResource:
                LOG.warning("The Redfish BMC links to %.200s but does not serve it (404 or "
                            "501): what it holds is absent from the inventory", path)
                self.missing.append(path)
                body = None
            self._seen[path] = body if isinstance(body, dict) or body is None else {}
        return self._seen[path]

    def docs(self, links: Any) -> Iterator[dict]:
        """The documents of a list of links, or of a collection's members."""
        if isinstance(links, dict):
            collection = self.doc(links) or {}
            links = collection.get("Members")
        if not isinstance(links, list):
            return
        if len(links) > MAX_MEMBERS:
            LOG.warning("A Redfish collection lists %d members; only the first %d are read",
                        len(links), MAX_MEMBERS)
        for link in links[:MAX_MEMBERS]:
            found = self.doc(link)
            if found is not None:
                yield found
