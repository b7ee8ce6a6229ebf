"""The Spark session every operation works in: started with the pipeline's settings laid over the
user's own (:mod:`lakemerge.config.user`), on this machine or on a Spark Connect server, or given
by the caller and checked once; and the settings ``lakemerge conf`` prints for a cluster."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from lakemerge.config import PipelineConfig, SparkSettings
from lakemerge.config.pipeline_file import load_pipeline
from lakemerge.documents import SparkConf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Pipeline = PipelineConfig | str | os.PathLike[str]


def spark_session(
    settings: SparkSettings | None = None,
    *,
    master: str | None = None,
    remote: str | None = None,
    verbose: bool = False,
) -> SparkSession:
    """The active SparkSession, or one started with ``settings`` laid over the user's own
    (:mod:`lakemerge.config.user`), ``master`` or ``remote`` (a Spark Connect URL) over both:
    Delta's jars and extensions, and Spark's own output in a log file unless ``verbose``."""
    from lakemerge.config.user import layered
    from lakemerge.spark import get_spark

    return get_spark(layered(settings, master=master, remote=remote), verbose=verbose)


def with_session(spark: SparkSession | None, settings: SparkSettings | None = None) -> SparkSession:
    """``spark``, checked once for Delta, or a session started with ``settings``."""
    if spark is None:
        return spark_session(settings)
    from lakemerge.spark.checks import check_session

    check_session(spark)
    return spark


def spark_conf(pipeline: Pipeline, *, master: str | None = None, spark_version: str | None = None) -> SparkConf:
    """The Spark settings lakemerge starts the pipeline's session with (the Kafka source among its
    packages when a table streams from Kafka), for ``spark-submit`` on a cluster whose Spark is
    ``spark_version`` (default: the installed PySpark's).

    Raises:
        ConfigError: ``spark_version`` (or the installed Spark) is not one lakemerge supports.
    """
    from lakemerge.config.user import layered
    from lakemerge.spark.session import session_conf
    from lakemerge.spark.versions import installed_pairing, pairing
    from lakemerge.streams.sources import with_kafka

    config = pipeline if isinstance(pipeline, PipelineConfig) else load_pipeline(pipeline)
    matching = pairing(spark_version) if spark_version else installed_pairing()
    settings = layered(with_kafka(config, matching), master=master)
    return SparkConf(master=settings.master, conf=session_conf(settings, matching))


def stream_settings(pipeline: Pipeline) -> SparkSettings:
    """The pipeline's Spark settings, with Spark's Kafka source among the packages when a table
    streams from Kafka."""
    from lakemerge.streams.sources import with_kafka

    return with_kafka(pipeline if isinstance(pipeline, PipelineConfig) else load_pipeline(pipeline))
