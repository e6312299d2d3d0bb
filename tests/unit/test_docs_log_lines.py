"""Every log line the docs quote is one the code can print.

Convention (stated in docs/operation.md, "Logs"): a quoted log line is
inline code right after its level in capitals, e.g. WARNING `The database answers again`, or
starting with it, e.g. `WARNING ... Process HOST is dead`.
Inside it, ``...`` and ``<name>`` stand for what the code fills in (any text); a value written
out must be one word (``try 2 of 6``). Each literal part of a quote (between
its wildcards) must fit a string of the code (a literal, an f-string, a %-format), the code's
placeholders (%s, {value}) standing for one word of the quote; a message composed from several
strings is quoted with a wildcard where one ends.
"""

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([*REPO.glob("docs/*.md"), REPO / "README.md"])
QUOTE = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) `([^`]+)`"
                   r"|`(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) ([^`]+)`")
_DOC_WILDCARD = re.compile(r"\.\.\.|…|<[^<>\s]+>")
_CODE_PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfixg]|\{[^{}]*\}")
STAR = "\x00"


def quotes() -> list[tuple[str, str]]:
    """(where, quoted line) of every quoted log line in the docs."""
    found = []
    for path in DOCS:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found += [(f"{path.name}:{number}", outside or inside)
                      for outside, inside in QUOTE.findall(line)]
    return found


def _code_strings() -> list[str]:
    """Every string the code holds, each placeholder as STAR."""
    strings = []
    for package in ("pxe_filter", "inspection"):
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = _CODE_PLACEHOLDER.sub(STAR, node.value).replace("%%", "%")
                elif isinstance(node, ast.JoinedStr):
                    text = "".join(
                        _CODE_PLACEHOLDER.sub(STAR, part.value)
                        if isinstance(part, ast.Constant) else STAR for part in node.values)
                else:
                    continue
                if len(text.replace(STAR, "").strip()) >= 4:
                    strings.append(text)
    return strings


CODE = _code_strings()


def fragments(quoted: str) -> list[str]:
    """The quote's literal parts between its wildcards (a message the code composes from
    several strings is quoted with a wildcard where one string ends)."""
    return [part.strip() for part in _DOC_WILDCARD.split(quoted) if part.strip()]


def _both_fit(first: str, second: str) -> bool:
    """Whether some text fits both the quote ``first`` (a STAR: any text) and the code's
    ``second`` (a STAR: one value the quote spells out, without spaces; or the quote's
    STAR)."""
    seen, todo = set(), [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(first) and j == len(second):
            return True
        a = first[i] if i < len(first) else None
        b = second[j] if j < len(second) else None
        if a == STAR:
            todo.append((i + 1, j))  # the star stands for nothing more
            if b is not None:
                todo.append((i, j + 1))  # it also covers the other's next character
        if b == STAR:
            todo.append((i, j + 1))
            if a is not None and not a.isspace():
                todo.append((i + 1, j))
        if a is not None and a == b != STAR:
            todo.append((i + 1, j + 1))
    return False


def _candidates(fragment: str) -> list[str]:
    # Only strings that hold a piece of the fragment are compared in full.
    words = re.findall(r"[A-Za-z_]{3,}", fragment) or [fragment]
    return [text for text in CODE if any(word in text for word in words)]


def _printed(fragment: str) -> bool:
    return any(_both_fit(STAR + fragment + STAR, text) for text in _candidates(fragment))


def test_the_docs_quote_log_lines():
    assert len(quotes()) >= 30


def test_the_check_refuses_what_the_code_never_prints():
    assert _printed("Sync skipped, files left as they are:")
    assert _printed("try 2 of 6 in 0.04 s")  # one value for each placeholder
    assert not _printed("Full sync failed")
    assert not _printed("Sync skipped, files left as they were:")


@pytest.mark.parametrize(("where", "quoted"), quotes(), ids=[w for w, _ in quotes()])
def test_quoted_log_line_exists_in_the_code(where, quoted):
    parts = fragments(quoted)
    assert sum(map(len, parts)) >= 8, f"{where}: quote too short to check"
    missing = [part for part in parts if not _printed(part)]
    assert not missing, f"{where}: no string of the code prints {missing} of {quoted!r}"
