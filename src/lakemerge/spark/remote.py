"""A session on a Spark Connect server: Spark and Delta run there, this process holds a client.

Settings Spark fixes when it starts (the master, packages, extensions, JVM options) are the server's;
the settings lakemerge starts its own sessions with that a session may change (the time zone that
timestamps are read in, no schema auto-merge) are set on the client's session, then the user's own.
A setting the server refuses to change at runtime is left as the server has it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from lakemerge.config.spark import SparkSettings
from lakemerge.errors import ConfigError, first_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The environment variable PySpark reads a Spark Connect URL from.
ENVIRONMENT = "SPARK_REMOTE"

#: The session setting saying who lists files over Spark Connect (:class:`SparkSettings` ``landing``).
LANDING = "spark.lakemerge.landing"

#: Settings every lakemerge session has, that a Connect session may set for itself.
SESSION_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
}


def remote_url(settings: SparkSettings) -> str | None:
    """The Spark Connect server to work through: the settings' ``remote``, else ``$SPARK_REMOTE``."""
    found = settings.remote or os.environ.get(ENVIRONMENT) or None
    if found is not None and not found.startswith("sc://"):
        named = None if settings.remote else ENVIRONMENT
        raise ConfigError(f"'{found}' is not a Spark Connect URL (sc://host:port)", key=named)
    return found


def client_only() -> bool:
    """Whether the installed PySpark is Spark Connect's client alone (``pyspark-client``: no JVM,
    no local Spark)."""
    from pyspark.util import is_remote_only

    return bool(is_remote_only())


def is_connect(spark: object) -> bool:
    """Whether ``spark`` is a Spark Connect client's session (not a session with a JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def connect(url: str, settings: SparkSettings) -> SparkSession:
    """A session on the Spark Connect server at ``url``, with lakemerge's session settings.

    Raises:
        ConfigError: the server cannot be reached, or refuses the session.
    """
    from pyspark.sql import SparkSession

    _client_installed(url)
    _reachable(url)
    try:
        spark = SparkSession.builder.remote(url).appName(settings.app_name).getOrCreate()
        str(spark.version)  # (the client connects on its first call)
    except Exception as exc:
        raise ConfigError(f"cannot reach the Spark Connect server at {url}: {_reason(exc)}") from None
    for key, value in {**SESSION_DEFAULTS, LANDING: settings.landing, **settings.conf}.items():
        _set(spark, key, value)
    return spark


#: Spark Connect's port when a URL names none.
DEFAULT_PORT = 15002

#: Seconds to wait for the server's port to answer (PySpark's own client retries for minutes).
CONNECT_TIMEOUT = 10.0


def address(url: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL (``sc://host[:port][/;param=value...]``).

    Raises:
        ConfigError: the URL names no host, or its port is not a number.
    """
    rest = url[len("sc://") :].split("/", 1)[0]
    host, port = rest, str(DEFAULT_PORT)
    if rest.startswith("["):  # (an IPv6 address)
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else port
    elif ":" in rest:
        host, port = rest.rsplit(":", 1)
    if not host or not port.isdigit():
        raise ConfigError(f"'{url}' is not a Spark Connect URL (sc://host:port)")
    return host, int(port)


#: What PySpark's Spark Connect client imports, by module and by the package that provides it.
CLIENT_MODULES = {
    "grpc": "grpcio",
    "grpc_status": "grpcio-status",
    "google.rpc": "googleapis-common-protos",
    "pyarrow": "pyarrow",
    "pandas": "pandas",
    "zstandard": "zstandard",
}


def _client_installed(url: str) -> None:
    """Fail naming what to install when PySpark's Spark Connect client lacks a package it needs
    (a PySpark installed without its ``connect`` extra)."""
    from importlib.util import find_spec

    def found(module: str) -> bool:
        try:
            return find_spec(module) is not None
        except ImportError:
            return False

    missing = [package for module, package in CLIENT_MODULES.items() if not found(module)]
    if missing:
        raise ConfigError(
            f"cannot work through the Spark Connect server at {url}: PySpark's Connect client needs "
            f"{', '.join(missing)}, not installed here (pip install 'pyspark[connect]', or lakemerge's "
            "spark or connect extra)"
        )


def _reachable(url: str) -> None:
    """Fail at once, naming the server, when nothing answers at the URL's host and port."""
    import socket

    host, port = address(url)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot reach the Spark Connect server at {url}: {reason}") from None


def _set(spark: SparkSession, key: str, value: str) -> None:
    """Set ``key`` on the session, unless the server fixed it when it started."""
    try:
        spark.conf.set(key, value)
    except Exception as exc:
        text = str(exc)
        if "CANNOT_MODIFY" in text or "static" in text.lower():
            return
        raise ConfigError(f"the Spark Connect server refused the setting {key}={value}: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    """The telling part of a Connect client's error (gRPC's status details, or its first line)."""
    text = str(exc)
    for marker in ('details = "', 'details="'):
        if marker in text:
            return text.split(marker, 1)[1].split('"', 1)[0][:300]
    return first_line(exc)
