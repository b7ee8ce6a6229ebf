"""JVM classes by name, looked up once per Spark gateway.

py4j's attribute path (``jvm.org.apache.spark.sql.delta.DeltaLog``) asks the JVM about every
segment, trying each as a class first: a search of every jar on the class path for ``org``, then
``org.apache``, and so on, and one more round trip for each static member named. A batch makes a
few hundred such lookups (50-70 ms of a 1.3 s warm batch on the benchmark's SF1 table,
bench/RESULTS.md). :func:`jclass` names the class whole and keeps its static members once found.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOCK = threading.Lock()
_CLASSES: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def jclass(spark: SparkSession, name: str) -> Any:
    """The JVM class ``name`` (fully qualified; nested classes with ``$``) of ``spark``'s gateway:
    call it to construct, or call its static methods. No round trip until it is used. A static
    field is read once and kept: use it for constants (enum values), never for state."""
    client = spark.sparkContext._gateway._gateway_client  # type: ignore[union-attr]
    with _LOCK:
        classes = _CLASSES.setdefault(client, {})
        found = classes.get(name)
        if found is None:
            found = classes[name] = _class(name, client)
    return found


def _class(name: str, client: Any) -> Any:
    global _KNOWN
    if _KNOWN is None:
        from py4j.java_gateway import JavaClass

        class Known(JavaClass):  # type: ignore[misc]
            """A class whose static members are looked up once (py4j asks on every access)."""

            def __getattr__(self, member: str) -> Any:
                members = self.__dict__.setdefault("_lm_members", {})
                if member not in members:
                    members[member] = JavaClass.__getattr__(self, member)
                return members[member]

        _KNOWN = Known
    return _KNOWN(name, client)


_KNOWN: Any = None


def scala_map(spark: SparkSession, items: Mapping[str, str]) -> Any:
    """A Scala immutable map of ``items`` in ``spark``'s JVM."""
    java = jclass(spark, "java.util.HashMap")()
    for key, value in items.items():
        java.put(key, value)
    return jclass(spark, "org.apache.spark.api.python.PythonUtils").toScalaMap(java)


def scala_seq(spark: SparkSession, items: Sequence[Any]) -> Any:
    """A Scala immutable sequence of ``items`` (JVM objects or values py4j converts) in ``spark``'s JVM."""
    java = jclass(spark, "java.util.ArrayList")()
    for item in items:
        java.add(item)
    return jclass(spark, "scala.jdk.javaapi.CollectionConverters").asScala(java).toSeq()
