"""The base of every configuration model, and how paths in them are made absolute."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict

from lakemerge.config.loading import is_uri


def absolute(path: str) -> str:
    """A local path made absolute against the current directory; URIs (``s3a://...``) unchanged.

    Spark resolves relative paths against the JVM's directory, which need not be Python's."""
    return path if not path or is_uri(path) or os.path.isabs(path) else os.path.abspath(path)


class Model(BaseModel):
    """Frozen, and unknown keys are errors: a configuration is a value, built once (from TOML, from
    a chombo ``.properties`` file, or in Python) and passed down the data's path unchanged."""

    model_config = ConfigDict(extra="forbid", frozen=True)
