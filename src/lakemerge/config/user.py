"""The user's own Spark settings, for every command, with or without a pipeline file.

A ``[spark]`` section in ``$LAKEMERGE_CONFIG``, else in ``$XDG_CONFIG_HOME/lakemerge/config.toml``
(``~/.config/lakemerge/config.toml``), holds what every session of this user needs: a Spark Connect
server, storage credentials and endpoints (``spark.hadoop.fs.s3a.*``), packages. A pipeline's own
``[spark]`` section is laid over it (its keys win; ``conf`` settings merge, ``packages`` add up), and
the command line's ``--master`` and ``--remote`` over both.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from lakemerge.config.loading import validate
from lakemerge.config.spark import SparkSettings
from lakemerge.errors import ConfigError

#: The environment variable naming the user's settings file.
ENVIRONMENT = "LAKEMERGE_CONFIG"


def settings_file() -> Path | None:
    """The user's settings file: ``$LAKEMERGE_CONFIG`` (which must exist), else the one in the
    user's configuration folder when there is one."""
    named = os.environ.get(ENVIRONMENT)
    if named:
        return Path(named)
    home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    found = Path(home) / "lakemerge" / "config.toml"
    return found if found.is_file() else None


def user_settings() -> SparkSettings:
    """The ``[spark]`` section of the user's settings file (defaults without one).

    Raises:
        ConfigError: the file is missing (when ``$LAKEMERGE_CONFIG`` names it), is not TOML, holds
            another section, or a setting is wrong (the message names file and key).
    """
    file = settings_file()
    if file is None:
        return SparkSettings()
    source = str(file)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"settings file does not exist (named by ${ENVIRONMENT})", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read settings file: {exc}", source=source) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", source=source) from None
    unknown = sorted(set(data) - {"spark"})
    if unknown:
        raise ConfigError("a settings file holds a [spark] section only", key=unknown[0], source=source)
    return validate(SparkSettings, data.get("spark", {}), source=source, prefix="spark")


def layered(own: SparkSettings | None, *, master: str | None = None, remote: str | None = None) -> SparkSettings:
    """``own`` (a pipeline's ``[spark]``, or nothing) laid over the user's settings, then
    ``master`` and ``remote`` (the command line's) over both."""
    base = user_settings()
    merged = base if own is None else own.over(base)
    if remote:
        merged = merged.model_copy(update={"remote": remote})
    if master:
        merged = merged.model_copy(update={"master": master, "remote": None if not remote else merged.remote})
    return merged
