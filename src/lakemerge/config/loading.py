"""Turn pydantic validation failures into ConfigErrors naming the offending key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from lakemerge.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], data: Mapping[str, Any], *, source: str | None, prefix: str = "") -> M:
    """Build ``model`` from ``data``; on failure raise a ConfigError for the first problem."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(part) for part in first["loc"]]
        key = ".".join(p for p in (prefix, *loc) if p)
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown key (check its spelling and section)"
        elif first["type"] == "missing":
            message = "required key is missing"
        more = len(exc.errors()) - 1
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise ConfigError(message, key=key or None, source=source) from None


def is_uri(path: str) -> bool:
    """True when ``path`` carries a scheme such as ``file:``, ``hdfs:`` or ``s3a:``."""
    head, sep, _ = path.partition(":")
    return bool(sep) and len(head) > 1 and head.replace("+", "").isalnum()
