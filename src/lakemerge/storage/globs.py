"""Hadoop's glob patterns, matched over any filesystem's folder listings.

A pattern is read as Hadoop's ``FileSystem.globStatus`` reads it (``GlobExpander``, ``GlobPattern``,
``Globber``): ``*`` (any run of characters) and ``?`` (one) within one path component, ``[abc]``,
``[a-z]`` and ``[!a]`` / ``[^a]`` sets, ``{a,b}`` alternatives (those holding a ``/`` expanded
first into whole patterns), and a backslash making the character after it stand for itself. A
component without a wildcard is a name; the folders before the last component are listed only
where a wildcard needs them. Unlike Hadoop's, the matching never builds a path from a listed
name, so an entry whose name holds ``:`` is matched like any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from lakemerge.storage import paths

if TYPE_CHECKING:
    from lakemerge.storage.entries import Entry


class Listing(Protocol):
    """What matching a pattern asks of a filesystem."""

    def listdir(self, path: str) -> list[Entry]: ...

    def status(self, path: str) -> Entry | None: ...


_WILDCARDS = "*?[{"

#: The characters a Hadoop glob pattern gives a meaning (``org.apache.hadoop.fs.GlobPattern``, as
#: Spark's readers tell a pattern from a path); a backslash before one makes it stand for itself.
GLOB_CHARACTERS = "[]{}*?\\"


#: A URI's scheme and authority (``s3a://bucket``, ``file:``), which a pattern leaves as they are.
_PREFIX = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:(?://[^/]*)?)?")


class PatternError(ValueError):
    """A pattern Hadoop would refuse (an unclosed set or group, a trailing backslash)."""


def glob(fs: Listing, pattern: str) -> list[Entry]:
    """The entries of ``fs`` that ``pattern`` matches, each once, as ``fs`` spells them."""
    scheme, authority, rest = paths.split(pattern)
    prefix = (f"{scheme}:" if scheme is not None else "") + (f"//{authority}" if authority is not None else "")
    found: dict[str, Entry] = {}
    for expanded in expand(rest):
        for entry in _match(fs, prefix + "/", [c for c in expanded.split("/") if c]):
            found.setdefault(entry.path, entry)
    return list(found.values())


def _match(fs: Listing, root: str, components: list[str]) -> list[Entry]:
    # Each candidate: its path, and its entry where a listing gave it (None: assumed to exist).
    candidates: list[tuple[str, Entry | None]] = [(root, None)]
    for index, component in enumerate(components):
        last = index == len(components) - 1
        regex = compiled(component)
        chosen: list[tuple[str, Entry | None]] = []
        for path, _ in candidates:
            if regex is None:
                name = unescaped(component)
                if last:
                    status = fs.status(paths.child(path, name))
                    if status is not None:
                        chosen.append((status.path, status))
                else:
                    chosen.append((paths.child(path, name), None))
                continue
            for entry in fs.listdir(path):
                if (last or entry.directory) and regex.fullmatch(entry.name):
                    chosen.append((entry.path, entry))
        candidates = chosen
    return [entry for _, entry in candidates if entry is not None]


def literal(path: str) -> str:
    """The glob pattern that matches ``path`` and nothing else: each of ``[ ] { } * ? \\`` in it
    after its scheme and authority escaped with a backslash (``file:/in/o[2].csv`` →
    ``file:/in/o\\[2\\].csv``). Spark's readers expand the paths they are given as patterns, so a
    listed file reaches them in this form; its rows still report its real path."""
    prefix, rest = split_prefix(path)
    return prefix + "".join("\\" + c if c in GLOB_CHARACTERS else c for c in rest)


def split_prefix(path: str) -> tuple[str, str]:
    """``path``'s scheme and authority (``s3a://bucket``, ``file:``, or nothing), and the rest."""
    prefix = _PREFIX.match(path)
    start = prefix.end() if prefix else 0
    return path[:start], path[start:]


def is_pattern(location: str) -> bool:
    """Whether ``location`` holds a character a glob gives a meaning (then it is expanded as one)."""
    return any(c in GLOB_CHARACTERS for c in location)


def has_wildcard(component: str) -> bool:
    """Whether ``component`` holds a wildcard that no backslash escapes."""
    return any(c in _WILDCARDS for c in re.sub(r"\\.", "", component))


def unescaped(text: str) -> str:
    """``text`` with each backslash escape replaced by the character it escapes."""
    return re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)


def compiled(component: str) -> re.Pattern[str] | None:
    """The regular expression of one path component of a pattern (as Hadoop's ``GlobPattern``
    compiles it), or ``None`` when it has no wildcard (a name).

    Raises:
        PatternError: an unclosed set or group, or a backslash escaping nothing.
    """
    if not has_wildcard(component):
        if component.endswith("\\") and not component.endswith("\\\\"):
            raise PatternError(f"Missing escaped character in the pattern {component!r}")
        return None
    regex: list[str] = []
    in_set = curly = 0
    i = 0
    while i < len(component):
        c = component[i]
        if c == "\\":
            i += 1
            if i >= len(component):
                raise PatternError(f"Missing escaped character in the pattern {component!r}")
            regex.append(re.escape(component[i]))
        elif in_set:
            if c == "]":
                in_set = 0
                regex.append("]")
            elif c in "!^" and component[i - 1] == "[":
                regex.append("^")
            elif c == "[":
                raise PatternError(f"Unclosed character class in the pattern {component!r}")
            else:
                regex.append(c if c.isalnum() or c == "-" else re.escape(c))
        elif c == "*":
            regex.append(".*")
        elif c == "?":
            regex.append(".")
        elif c == "{":
            curly += 1
            regex.append("(?:")
        elif c == "," and curly:
            regex.append("|")
        elif c == "}" and curly:
            curly -= 1
            regex.append(")")
        elif c == "[":
            in_set = 1
            regex.append("[")
        else:
            regex.append(re.escape(c))
        i += 1
    if in_set:
        raise PatternError(f"Unclosed character class in the pattern {component!r}")
    if curly:
        raise PatternError(f"Unclosed group in the pattern {component!r}")
    return re.compile("".join(regex), re.DOTALL)


def expand(pattern: str) -> list[str]:
    """``pattern`` with each ``{...}`` group holding a ``/`` expanded into whole patterns, one per
    alternative (Hadoop's ``GlobExpander``: ``a/{b/c,d}/*`` → ``a/b/c/*``, ``a/d/*``)."""
    start = _slashed_group(pattern)
    if start is None:
        return [pattern]
    end, alternatives = _alternatives(pattern, start)
    found: list[str] = []
    for alternative in alternatives:
        found.extend(expand(pattern[:start] + alternative + pattern[end + 1 :]))
    return found


def _slashed_group(pattern: str) -> int | None:
    """Where the first outermost ``{`` group holding a ``/`` starts, or ``None``."""
    depth, start = 0, -1
    for i, c in _unescaped(pattern, 0):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}" and depth:
            depth -= 1
            if depth == 0 and "/" in pattern[start:i]:
                return start
    return None


def _alternatives(pattern: str, start: int) -> tuple[int, list[str]]:
    """The end of the group starting at ``start`` and its alternatives (split at its own commas)."""
    depth, piece = 0, start + 1
    found: list[str] = []
    for i, c in _unescaped(pattern, start):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                found.append(pattern[piece:i])
                return i, found
        elif c == "," and depth == 1:
            found.append(pattern[piece:i])
            piece = i + 1
    raise PatternError(f"Unclosed group in the pattern {pattern!r}")


def _unescaped(pattern: str, start: int) -> Iterator[tuple[int, str]]:
    """Each character of ``pattern`` from ``start`` with its index, but those a ``\\`` escapes (and
    the backslashes themselves)."""
    i = start
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        yield i, pattern[i]
        i += 1
