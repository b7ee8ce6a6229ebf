"""Paths spelled as Hadoop spells them, without Hadoop: every filesystem lakemerge lists through
names files the way a classic session's Hadoop does, so that a ledger written by one session is
read by another and paths compare as strings.

A path is ``scheme:`` (optional), ``//authority`` (optional) and the rest. Hadoop's ``Path``
collapses ``//`` in the rest, drops a trailing ``/`` (the root's excepted) and resolves ``.`` and
``..`` segments; its ``toString()`` gives the rest as it is (``file:/in/a b.csv``), its URI
(``toUri().toString()``, how Spark's ``_metadata.file_path`` names a file) quotes what a URI's
path may not hold (``file:/in/a%20b.csv``).
"""

from __future__ import annotations

import os
import unicodedata

#: The schemes of object stores: a folder there is only the common prefix of the objects in it,
#: so an empty one does not exist.
OBJECT_STORES = frozenset({"s3a", "s3", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "oss", "cos", "cosn"})

#: What a URI's path holds unquoted, beside letters and digits (java.net.URI: unreserved and
#: punctuation characters, ``/`` and ``@``).
_PLAIN = frozenset("_-!.~'()*" + ",;:$&+=" + "/@")


def split(path: str) -> tuple[str | None, str | None, str]:
    """``path``'s scheme, authority and the rest, as Hadoop's ``Path(String)`` parses them: a
    scheme is what comes before a ``:`` that precedes every ``/``; an authority follows ``//``."""
    scheme = authority = None
    start = 0
    colon, slash = path.find(":"), path.find("/")
    if colon != -1 and (slash == -1 or colon < slash):
        scheme, start = path[:colon], colon + 1
    if path.startswith("//", start) and len(path) - start > 2:
        end = path.find("/", start + 2)
        end = end if end > 0 else len(path)
        authority, start = path[start + 2 : end], end
    return scheme, authority, path[start:]


def scheme(path: str) -> str:
    """The scheme of ``path`` in lower case (``file`` for a path without one)."""
    found = split(path)[0]
    return found.lower() if found else "file"


def is_object_store(path: str) -> bool:
    """Whether ``path`` is on an object store (:data:`OBJECT_STORES`)."""
    return scheme(path) in OBJECT_STORES


def hidden(name: str) -> bool:
    """Whether an entry of this name is hidden, as Hadoop's and Spark's own files are (``.`` or
    ``_`` first): Spark's readers pass over them, and so does a landing zone's listing."""
    return name.startswith((".", "_"))


def spelled(path: str) -> str:
    """``path`` as Hadoop's ``Path(path).toString()`` spells it (``file:///in//a/`` → ``file:/in/a``)."""
    found_scheme, authority, rest = split(path)
    rest = _normal(rest)
    head = f"{found_scheme}:" if found_scheme is not None else ""
    return head + (f"//{authority}" if authority else "") + rest


def as_uri(path: str) -> str:
    """``path`` as Hadoop's ``Path(path).toUri().toString()`` spells it: :func:`spelled`, with what a
    URI's path may not hold percent-encoded as UTF-8 (``%`` always; letters beyond ASCII stay)."""
    found_scheme, authority, rest = split(path)
    head = f"{found_scheme}:" if found_scheme is not None else ""
    if authority is not None:
        head += f"//{authority}"
    return head + "".join(_quoted(c) for c in _normal(rest))


def qualified_local(path: str) -> str:
    """A path of this machine's disk (absolute, or relative to the current folder) as a fully
    qualified Hadoop URI: ``file:`` and the absolute path."""
    found = split(path)
    if found[0] is not None:
        return spelled(path)
    return spelled("file:" + os.path.abspath(path))


def child(folder: str, name: str) -> str:
    """The entry ``name`` of the folder ``folder`` (both spelled as Hadoop spells them)."""
    return folder + name if folder.endswith("/") else f"{folder}/{name}"


def relative(path: str, folder: str) -> str | None:
    """``path``'s part below ``folder`` (``a/x.csv``), or ``None`` when it is not inside it."""
    base = folder.rstrip("/") + "/"
    return path[len(base) :] if path.startswith(base) and len(path) > len(base) else None


def _normal(rest: str) -> str:
    """A path's rest as Hadoop's ``Path`` normalises it: ``//`` collapsed once (Hadoop replaces
    each pair once), no trailing ``/`` but the root's, ``.`` and ``..`` segments resolved."""
    rest = rest.replace("//", "/")
    if len(rest) > 1 and rest.endswith("/"):
        rest = rest[:-1]
    parts = rest.split("/")
    if "." not in parts and ".." not in parts:
        return rest
    kept: list[str] = []
    for part in parts:
        if part == ".":
            continue
        if part == ".." and kept and kept[-1] not in ("", ".."):
            kept.pop()
            continue
        kept.append(part)
    if parts[-1] in (".", ".."):
        kept.append("")  # (java.net.URI keeps the folder's trailing slash)
    return "/".join(kept)


def _quoted(char: str) -> str:
    if char.isascii():
        return char if char.isalnum() or char in _PLAIN else f"%{ord(char):02X}"
    if unicodedata.category(char) in ("Zs", "Zl", "Zp", "Cc"):
        return "".join(f"%{b:02X}" for b in char.encode("utf-8"))
    return char
