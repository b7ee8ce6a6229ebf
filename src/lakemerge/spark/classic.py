"""The backend of a classic session: its JVM in this process, driven through py4j
(:mod:`lakemerge.spark.backend` says what a backend is)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from lakemerge.errors import ConfigError
from lakemerge.spark.backend import Backend, Stage
from lakemerge.spark.jvm import jclass

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from lakemerge.spark.versions import Pairing

A = TypeVar("A")
B = TypeVar("B")

#: A class of Delta's Spark jar, whose jar file names the Spark line it was built for.
_DELTA_CLASS = "org.apache.spark.sql.delta.DeltaLog"
_DELTA_JAR = re.compile(r"delta-spark_(\d+\.\d+)_[\d.]+-([^/]+?)\.jar$")


#: How long the Kafka cluster is given to answer a question about its topics.
_KAFKA_SECONDS = 60


def _line(version: str) -> tuple[int, int]:
    major, minor = [*version.split("."), "0", "0"][:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


class ClassicBackend(Backend):
    """A session whose JVM lakemerge drives directly."""

    jvm = True

    def check_delta(self, version: str, matching: Pairing) -> None:
        utils = jclass(self.spark, "org.apache.spark.util.Utils")
        if not utils.classIsLoadable(_DELTA_CLASS):
            raise ConfigError(
                f"the Spark session has Delta Lake's extension but not its jars: add the package {matching.delta} "
                "(spark.jars.packages) when the session starts"
            )
        source = utils.classForName(_DELTA_CLASS, True, False).getProtectionDomain().getCodeSource()
        location = str(source.getLocation()) if source is not None else ""
        found = _DELTA_JAR.search(location)
        if found is not None and found.group(1) != matching.spark:
            raise ConfigError(
                f"the Spark session runs Spark {version} with Delta Lake's build for Spark {found.group(1)} "
                f"(delta-spark_{found.group(1)}, {found.group(2)}): use {matching.delta} instead"
            )

    def parallelism(self) -> int:
        return max(1, int(self.spark.sparkContext.defaultParallelism))

    def quiet(self) -> None:
        self.spark.sparkContext.setLogLevel("ERROR")

    def leaf(self, kept: DataFrame) -> DataFrame:
        """Spark 4.2 fails a plan that reads such a leaf twice (a self-join, a union): a second
        instance of the leaf, as the analyser makes one, cannot be compared with others
        (``InMemoryRelation.doCanonicalize`` looks the cached plan's columns up among the new
        instance's). From Spark 4.2 on, the persisted frame itself is built on."""
        from pyspark.sql import DataFrame

        if _line(str(self.spark.version)) >= (4, 2):
            return kept
        session: Any = self.spark._jsparkSession
        try:
            found = session.sharedState().cacheManager().lookupCachedData(kept._jdf)
            if not found.isDefined():
                return kept
            relation = found.get().cachedRepresentation()
            leaf = jclass(self.spark, "org.apache.spark.sql.classic.Dataset").ofRows(session, relation)
        except Exception:  # another Spark's internals: plan on the persisted frame, as Spark would
            return kept
        return DataFrame(leaf, self.spark)

    def in_tail(self, first: Callable[[], A], then: Callable[[], B]) -> tuple[A, B]:
        from lakemerge.spark.tail import in_tail

        return in_tail(self.spark, first, then)

    def identity(self) -> Any:
        return self.spark._jsparkSession

    def driver_path(self, path: str) -> str | None:
        return str(jclass(self.spark, "java.io.File")(path).getAbsolutePath())

    def json_schema(self, texts: DataFrame) -> StructType:
        from pyspark.sql import DataFrame as SparkFrame

        encoder = jclass(self.spark, "org.apache.spark.sql.Encoders").STRING()
        dataset = getattr(texts._jdf, "as")(encoder)
        return SparkFrame(self.spark._jsparkSession.read().json(dataset), self.spark).schema

    def kafka_partitions(
        self, servers: str, options: Mapping[str, str], topics: Sequence[str], pattern: str | None
    ) -> list[tuple[str, int]] | None:
        """Asked of the cluster by Kafka's admin client in the session's JVM (the Kafka source's
        dependency); ``None`` when the JVM has no such client or the cluster does not answer."""
        utils = jclass(self.spark, "org.apache.spark.util.Utils")
        if not utils.classIsLoadable("org.apache.kafka.clients.admin.Admin"):
            return None
        settings = jclass(self.spark, "java.util.Properties")()
        settings.setProperty("bootstrap.servers", servers)
        for name, value in options.items():
            if name.startswith("kafka.") and name != "kafka.bootstrap.servers":
                settings.setProperty(name.removeprefix("kafka."), value)
        seconds = jclass(self.spark, "java.util.concurrent.TimeUnit").SECONDS
        admin = jclass(self.spark, "org.apache.kafka.clients.admin.Admin").create(settings)
        try:
            names = [str(n) for n in admin.listTopics().names().get(_KAFKA_SECONDS, seconds)]
            if pattern is not None:
                matcher = jclass(self.spark, "java.util.regex.Pattern").compile(pattern)
                chosen = [n for n in names if matcher.matcher(n).matches()]
            else:
                chosen = [n for n in names if n in set(topics)]
            if not chosen:
                return []
            listed = jclass(self.spark, "java.util.ArrayList")()
            for name in chosen:
                listed.add(name)
            described = admin.describeTopics(listed).allTopicNames().get(_KAFKA_SECONDS, seconds)
            return sorted((str(name), int(p.partition())) for name in chosen for p in described.get(name).partitions())
        except Exception:  # (the cluster did not answer: the caller starts where it can without)
            return None
        finally:
            admin.close()

    def stages(self) -> list[Stage] | None:
        tracker = self.spark.sparkContext.statusTracker()
        found = []
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                name = f"stage {stage_id}: " + str(info.name).split(" at ")[0][:40]
                found.append(Stage(str(stage_id), name, int(info.numCompletedTasks), int(info.numTasks)))
        return found
