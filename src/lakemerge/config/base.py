"""The base of every configuration model, how its keys get their descriptions, and how paths in
them are made absolute."""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from lakemerge.config.loading import is_uri

_ENTRY = re.compile(r"(?P<names>[a-z_][a-z0-9_]*(?: / [a-z_][a-z0-9_]*)*): (?P<text>.*)")


def absolute(path: str) -> str:
    """A local path made absolute against the current directory; URIs (``s3a://...``) unchanged.

    Spark resolves relative paths against the JVM's directory, which need not be Python's."""
    return path if not path or is_uri(path) or os.path.isabs(path) else os.path.abspath(path)


def attribute_docs(doc: str) -> dict[str, str]:
    """The entries of a docstring's ``Attributes:`` section, by name, each one paragraph (an entry
    ``a / b: text`` describes both ``a`` and ``b``)."""
    lines = doc.expandtabs().splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Attributes:"), None)
    if start is None:
        return {}
    indent = len(lines[start]) - len(lines[start].lstrip())
    found: dict[str, str] = {}
    names: list[str] = []
    for line in lines[start + 1 :]:
        depth = len(line) - len(line.lstrip())
        if line.strip() and depth <= indent:
            break
        entry = _ENTRY.fullmatch(line.strip()) if depth == indent + 4 else None
        if entry:
            names = entry["names"].split(" / ")
            found.update(dict.fromkeys(names, entry["text"]))
        elif line.strip() and names:
            found.update({name: f"{found[name]} {line.strip()}" for name in names})
    return found


class Model(BaseModel):
    """Frozen, and unknown keys are errors: a configuration is a value, built once (from TOML, from
    a chombo ``.properties`` file, or in Python) and passed down the data's path unchanged.

    Each key's description is its entry in the ``Attributes:`` section of its model's docstring
    (the manual's reference of pipeline keys is made from them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        described = attribute_docs(cls.__doc__ or "")
        for name, field in cls.model_fields.items():
            if field.description is None and name in described:
                field.description = described[name]
