"""The Spark session every operation works in: started with the pipeline's settings laid over the
user's own (:mod:`lakemerge.config.user`), on this machine or on a Spark Connect server, or given
by the caller and checked once; and the settings ``lakemerge conf`` prints for a cluster."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge.config import PipelineConfig, SparkSettings
from lakemerge.config.pipeline_file import load_pipeline
from lakemerge.documents import SparkConf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Pipeline = PipelineConfig | str | os.PathLike[str]


def storage_paths(config: PipelineConfig) -> list[str]:
    """Every path the pipeline's commands may touch: each table's, its side tables', its feeds'
    locations and archives, its stream's checkpoint, each group's state and checkpoint, and each
    source's tables' folder (its path template's fixed part), state and checkpoint."""
    found: list[str] = []
    for table in config.tables.values():
        found.extend((table.path, table.quarantine, table.tombstone_table, table.log_table))
        for feed in table.feeds:
            found.extend(feed.location)
            if feed.archive:
                found.append(feed.archive)
        if table.stream is not None:
            found.append(table.stream.checkpoint)
    for group in config.groups.values():
        found.append(group.state)
        if group.stream is not None:
            found.append(group.stream.checkpoint)
    for source in config.sources.values():
        found.extend((source.table_path.split("{", 1)[0], source.state, source.checkpoint))
    return found


def spark_session(
    settings: SparkSettings | None = None,
    *,
    paths: Sequence[str] = (),
    master: str | None = None,
    remote: str | None = None,
    verbose: bool = False,
) -> SparkSession:
    """The active SparkSession, or one started with ``settings`` laid over the user's own
    (:mod:`lakemerge.config.user`), ``master`` or ``remote`` (a Spark Connect URL) over both:
    Delta's jars and extensions, the S3 jars when ``paths`` (what the command touches) reach
    ``s3a:`` (:mod:`lakemerge.spark.packages`), and Spark's own output in a log file unless
    ``verbose``. Each ``s3a:`` bucket of ``paths`` is reached once before anything else, so that a
    store that cannot be reached fails naming the path (:func:`lakemerge.storage.probe.probe`).

    Raises:
        ConfigError: the session cannot start, or the store of an ``s3a:`` path has no filesystem
            in it.
        InputError: the store of a path cannot be reached (credentials, bucket, endpoint).
    """
    from lakemerge.config.user import layered
    from lakemerge.spark import get_spark
    from lakemerge.spark.packages import with_storage
    from lakemerge.storage.probe import probe

    spark = get_spark(with_storage(layered(settings, master=master, remote=remote), paths), verbose=verbose)
    probe(spark, paths)
    return spark


def remote_of(settings: SparkSettings | None = None, *, remote: str | None = None) -> str | None:
    """The Spark Connect server a session started with ``settings`` (laid over the user's own,
    ``remote`` over both) works through, or ``None`` for a Spark started here.

    Raises:
        ConfigError: the URL given is not a Spark Connect URL.
    """
    from lakemerge.config.user import layered
    from lakemerge.spark.remote import remote_url

    return remote_url(layered(settings, remote=remote))


def with_session(
    spark: SparkSession | None, settings: SparkSettings | None = None, paths: Sequence[str] = ()
) -> SparkSession:
    """``spark``, checked once for Delta (and the stores of ``paths``), or a session started with
    ``settings`` for ``paths``."""
    if spark is None:
        return spark_session(settings, paths=paths)
    from lakemerge.spark.checks import check_session
    from lakemerge.storage.probe import probe

    check_session(spark)
    probe(spark, paths)
    return spark


def spark_conf(pipeline: Pipeline, *, master: str | None = None, spark_version: str | None = None) -> SparkConf:
    """The Spark settings lakemerge starts the pipeline's session with (the Kafka source among its
    packages when a table streams from Kafka, the S3 jars when it reaches ``s3a:``), for
    ``spark-submit`` on a cluster whose Spark is ``spark_version`` (default: the installed PySpark's).

    Raises:
        ConfigError: ``spark_version`` (or the installed Spark) is not one lakemerge supports.
    """
    from lakemerge.config.user import layered
    from lakemerge.spark.packages import with_storage
    from lakemerge.spark.session import session_conf
    from lakemerge.spark.versions import installed_hadoop, installed_pairing, pairing
    from lakemerge.streams.sources import with_kafka

    config = pipeline if isinstance(pipeline, PipelineConfig) else load_pipeline(pipeline)
    matching = pairing(spark_version) if spark_version else installed_pairing()
    hadoop = matching.hadoop if spark_version else installed_hadoop(matching)
    settings = with_storage(layered(with_kafka(config, matching), master=master), storage_paths(config), hadoop)
    return SparkConf(master=settings.master, conf=session_conf(settings, matching))


def stream_settings(pipeline: Pipeline) -> SparkSettings:
    """The pipeline's Spark settings, with Spark's Kafka source among the packages when a table
    streams from Kafka."""
    from lakemerge.streams.sources import with_kafka

    return with_kafka(pipeline if isinstance(pipeline, PipelineConfig) else load_pipeline(pipeline))


def single_driver_tables(config: PipelineConfig, spark: SparkSession) -> list[str]:
    """The paths of the pipeline's tables on ``s3a:`` whose commits ``spark`` makes through Delta's
    default S3 log store: safe while one driver writes each (``[spark] s3_commits`` says more)."""
    from lakemerge.spark.logstore import CLASS
    from lakemerge.spark.packages import reaches_s3a

    try:
        chosen = str(spark.conf.get("spark.delta.logStore.s3a.impl", "") or "")
    except Exception:  # (a session that does not say: Delta's default)
        chosen = ""
    if chosen == CLASS:
        return []
    return [t.path for t in config.tables.values() if reaches_s3a([t.path])]
