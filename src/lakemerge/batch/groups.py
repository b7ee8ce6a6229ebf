"""Groups of tables applied together, and the consistent point readers use (what the transactions
of Hive's streaming mutation API gave, over several tables).

A group run applies one batch to each table of the group, in order. Only when every table has
succeeded is the group's point, ``{table: version}``, appended to the group's state (a Delta table,
so the append is atomic). A failure leaves the last point where it was; readers that time-travel
each table to the last point see every table of the last fully committed group run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakemerge.batch.attempts import apply_table
from lakemerge.config.pipeline import GroupConfig, PipelineConfig
from lakemerge.errors import ConfigError
from lakemerge.results import BatchResult, GroupPoint
from lakemerge.spark import localfs
from lakemerge.table.offsets import Ends, ends_from_json, ends_json
from lakemerge.table.snapshots import is_delta, latest_snapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Mirrored:
    """A source's table as its points record it: its path and its key columns."""

    path: str
    key: tuple[str, ...]


@dataclass(frozen=True)
class SourceState:
    """What a group's (or a source's) points say: the greatest transaction id (``None``: none
    yet), the Kafka offsets its transactions read (per partition, one past the last), the tables
    of a source (path and key) and the version of its staging table that goes with the last point
    (``None``: nothing ever waited)."""

    last: int | None = None
    offsets: Ends = field(default_factory=dict)
    tables: dict[str, Mirrored] = field(default_factory=dict)
    staging: int | None = None


def apply_group(
    pipeline: PipelineConfig, group: str, *, spark: SparkSession
) -> tuple[list[BatchResult], GroupPoint | None]:
    """Apply one batch to each table of ``group``, then record the group's point.

    Returns:
        The batches committed, and the new point (``None`` when no table had anything pending).

    Raises:
        LakemergeError: a table failed; tables before it stay committed, the point is unchanged.
    """
    config = group_config(pipeline, group)
    results = [apply_table(pipeline.table(name), spark=spark) for name in config.tables]
    if all(r.version is None for r in results):
        return [], None
    versions = {name: latest_version(spark, pipeline.table(name).path) for name in config.tables}
    return [r for r in results if r.version is not None], record_point(spark, group, config, versions)


def snapshot(pipeline: PipelineConfig, group: str, *, spark: SparkSession) -> GroupPoint | None:
    """The group's last recorded point, or ``None`` before its first complete run."""
    config = group_config(pipeline, group)
    if not is_delta(spark, config.state):
        return None
    rows = spark.read.format("delta").load(config.state).orderBy("point", ascending=False).limit(1).collect()
    if not rows:
        return None
    row = rows[0].asDict()
    transaction = row.get("transaction")
    return GroupPoint(
        group=group,
        point=int(row["point"]),
        versions=json.loads(row["versions"]),
        recorded_at=int(row["recorded_at"]),
        transaction=int(transaction) if transaction is not None else None,
    )


def record_point(
    spark: SparkSession,
    group: str,
    config: GroupConfig,
    versions: dict[str, int],
    *,
    transaction: int | None = None,
    offsets: Ends | None = None,
    mirrored: Mapping[str, Mirrored] | None = None,
    staging: int | None = None,
) -> GroupPoint:
    """Append the group's next point (one atomic Delta commit to its state), with the transaction
    that made it when there was one, and, for a stream's, the Kafka offsets the group's
    transactions read up to it (per partition, one past the last: :func:`applied_offsets`);
    for a source's, the path and key of each of its tables and its staging table's version
    (:func:`source_state`)."""
    previous = None
    if is_delta(spark, config.state):
        previous = spark.read.format("delta").load(config.state).agg({"point": "max"}).collect()[0][0]
    point = GroupPoint(
        group=group,
        point=int(previous or 0) + 1,
        versions=versions,
        recorded_at=int(time.time() * 1000),
        transaction=transaction,
    )
    frame = spark.createDataFrame(
        [
            (
                point.point,
                json.dumps(versions, sort_keys=True),
                point.recorded_at,
                transaction,
                ends_json(offsets) if offsets else None,
                _mirrored_json(mirrored) if mirrored else None,
                staging,
            )
        ],
        "point BIGINT, versions STRING, recorded_at BIGINT, transaction BIGINT, offsets STRING, tables STRING, "
        "staging BIGINT",
    )
    with localfs.writing(spark, (config.state,)):
        frame.coalesce(1).write.format("delta").mode("append").option("mergeSchema", "true").save(config.state)
    return point


def applied_offsets(spark: SparkSession, config: GroupConfig) -> tuple[int | None, Ends]:
    """The greatest transaction id among the group's points (``None``: none yet), and the Kafka
    offsets the last point holding any says its transactions applied (one past the last, per
    partition): what a group's stream has applied, whatever its checkpoint says (one Spark job)."""
    state = source_state(spark, config)
    return state.last, state.offsets


def source_state(spark: SparkSession, config: GroupConfig) -> SourceState:
    """As :func:`applied_offsets`, with the tables the last point holding them lists (a source's
    points: the path of each of its tables and the key it was created with) and the staging
    table's version, in the same Spark job."""
    from pyspark.sql import functions as F

    if not is_delta(spark, config.state):
        return SourceState()
    points = spark.read.format("delta").load(config.state)
    if "transaction" not in points.columns:
        return SourceState()
    if "offsets" not in points.columns:
        found = points.agg(F.max("transaction")).collect()[0][0]
        return SourceState(int(found) if found is not None else None)

    def last(column: str, kind: str = "string") -> Any:
        if column not in points.columns:
            return F.lit(None).cast(kind).alias(column)
        return F.max_by(column, F.when(F.col(column).isNotNull(), F.col("point"))).alias(column)

    row = points.agg(
        F.max("transaction").alias("transaction"), last("offsets"), last("tables"), last("staging", "bigint")
    ).collect()[0]
    found, staging = row["transaction"], row["staging"]
    return SourceState(
        int(found) if found is not None else None,
        ends_from_json(row["offsets"]),
        _mirrored(row["tables"]),
        int(staging) if staging is not None else None,
    )


def _mirrored_json(tables: Mapping[str, Mirrored]) -> str:
    return json.dumps({t: {"path": m.path, "key": list(m.key)} for t, m in tables.items()}, sort_keys=True)


def _mirrored(text: str | None) -> dict[str, Mirrored]:
    found = json.loads(text or "{}")
    return {str(t): Mirrored(str(m["path"]), tuple(str(c) for c in m["key"])) for t, m in found.items()}


def latest_version(spark: SparkSession, path: str) -> int:
    """The table's latest version."""
    return latest_snapshot(spark, path).version


def group_config(pipeline: PipelineConfig, group: str) -> GroupConfig:
    """The group called ``group`` (a source: where its points are recorded, its tables those each
    point lists), or a ConfigError naming the pipeline's groups and sources."""
    if group not in pipeline.groups and group in pipeline.sources:
        return GroupConfig.model_construct(tables=(), state=pipeline.sources[group].state, stream=None)
    try:
        return pipeline.groups[group]
    except KeyError:
        known = ", ".join(sorted([*pipeline.groups, *pipeline.sources])) or "none"
        raise ConfigError(
            f"no group named '{group}'; the pipeline has: {known}", key="groups", source=pipeline.source
        ) from None


def grouped(pipeline: PipelineConfig, tables: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``tables`` into the groups they belong to and the tables outside any group."""
    groups: list[str] = []
    single: list[str] = []
    for name in tables:
        group = pipeline.group_of(name)
        if group is None:
            single.append(name)
        elif group not in groups:
            groups.append(group)
    return groups, single
