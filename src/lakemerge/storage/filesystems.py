"""Which filesystem reaches a path (:mod:`lakemerge.storage.filesystem`), chosen once per session
and scheme.

A classic session goes through Hadoop in its JVM, for every scheme. A Spark Connect session has no
JVM here: the session's ``spark.lakemerge.landing`` setting (``[spark] landing`` of a pipeline file)
says who lists the files, ``client`` (this process, through ``pyarrow.fs``) or ``server`` (Spark's
``binaryFile`` listing on the server). ``auto``, the default, takes the client for object stores
(S3, GCS), for this machine's disk when the server runs here too (its URL names this host), and
for HDFS where libhdfs loads; the server otherwise.
"""

from __future__ import annotations

import socket
import threading
import weakref
from typing import TYPE_CHECKING, Any

from lakemerge.errors import ConfigError
from lakemerge.spark.backends import backend
from lakemerge.spark.remote import LANDING
from lakemerge.storage import paths
from lakemerge.storage.filesystem import FileSystem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CHOICES = ("auto", "client", "server")

_LOCK = threading.Lock()
_CHOSEN: weakref.WeakKeyDictionary[Any, dict[str, FileSystem]] = weakref.WeakKeyDictionary()


def filesystem(spark: SparkSession, path: str) -> FileSystem:
    """The filesystem reaching ``path`` in ``spark``'s session, chosen once per session and scheme.

    Raises:
        ConfigError: ``landing = "client"`` for a scheme this process cannot reach, or an unknown
            ``landing``.
    """
    scheme = paths.scheme(path)
    with _LOCK:
        chosen = _CHOSEN.setdefault(spark, {})
        found = chosen.get(scheme)
        if found is None:
            found = chosen[scheme] = _choose(spark, scheme)
    return found


def _choose(spark: SparkSession, scheme: str) -> FileSystem:
    if backend(spark).jvm:
        from lakemerge.storage.hadoop import HadoopFileSystem

        return HadoopFileSystem(spark)
    from lakemerge.storage import arrow

    landing = str(spark.conf.get(LANDING, "auto") or "auto").strip().lower()
    if landing not in CHOICES:
        raise ConfigError(f"'{landing}' is not one of {', '.join(CHOICES)}", key=LANDING)
    if landing == "client" and not arrow.serves(scheme):
        raise ConfigError(
            f'landing = "client": this process cannot reach {scheme}: paths itself (pyarrow has no filesystem '
            'for them here); set landing = "server" to have the Spark Connect server list them',
            key=LANDING,
        )
    client = landing == "client" or (landing == "auto" and _reachable(spark, scheme))
    if client:
        return arrow.ArrowFileSystem(spark, scheme)
    from lakemerge.storage.server import ServerFileSystem

    return ServerFileSystem(spark)


def _reachable(spark: SparkSession, scheme: str) -> bool:
    """Whether ``auto`` lists ``scheme``'s paths here (see the module)."""
    from lakemerge.storage import arrow

    if scheme == "file":
        return server_is_here(spark)
    return (scheme in paths.OBJECT_STORES and arrow.serves(scheme)) or (scheme in arrow.HDFS and arrow.serves(scheme))


def server_is_here(spark: SparkSession) -> bool:
    """Whether the Spark Connect server of ``spark`` runs on this machine (its URL's host is a
    loopback address or this host's name), so that both see the same disk."""
    try:
        client: Any = spark
        host = str(client.client._builder.host).strip("[]").lower()
    except Exception:  # (a client that does not say)
        return False
    if host in ("localhost", "::1") or host.startswith("127."):
        return True
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    return host in names
