"""The jars a session needs for the storage it reaches, beside Delta's: ``s3a:`` paths anywhere in
what a command touches (a table, a landing zone, an archive, a checkpoint) add Hadoop's S3A
filesystem and the part of the AWS SDK it uses, matching the Hadoop of the Spark that runs, unless
the settings bring S3A themselves (a ``hadoop-aws`` among their packages or jars)."""

from __future__ import annotations

from collections.abc import Iterable

from lakemerge.config.spark import SparkSettings
from lakemerge.spark import versions

#: The Spark settings that name jars and excluded artifacts.
PACKAGES = "spark.jars.packages"
JARS = "spark.jars"
EXCLUDES = "spark.jars.excludes"

#: The schemes served by S3A.
S3A = ("s3a",)


def reaches_s3a(paths: Iterable[str]) -> bool:
    """Whether any of ``paths`` is an ``s3a:`` URI."""
    return any(p.split(":", 1)[0].lower() in S3A for p in paths if ":" in p)


def brings_s3a(settings: SparkSettings) -> bool:
    """Whether ``settings`` name their own S3A (``hadoop-aws``) among packages or jars."""
    named = [*settings.packages, settings.conf.get(PACKAGES, ""), settings.conf.get(JARS, "")]
    return any("hadoop-aws" in n for n in named)


def with_storage(settings: SparkSettings, paths: Iterable[str], hadoop: str | None = None) -> SparkSettings:
    """``settings`` with the S3 jars of Hadoop ``hadoop`` (default: the installed Spark's) among
    their packages and the AWS SDK's bundle excluded, when ``paths`` reach ``s3a:`` and the
    settings bring no S3A of their own; else ``settings`` unchanged.

    Raises:
        ConfigError: a Hadoop release whose S3 jars lakemerge does not know.
    """
    if not reaches_s3a(paths) or brings_s3a(settings):
        return settings
    added = versions.s3_packages(hadoop or versions.installed_hadoop())
    excluded = [e.strip() for e in settings.conf.get(EXCLUDES, "").split(",") if e.strip()]
    conf = {**settings.conf, EXCLUDES: ",".join(dict.fromkeys([*excluded, versions.AWS_BUNDLE]))}
    return settings.model_copy(update={"packages": tuple(dict.fromkeys((*settings.packages, *added))), "conf": conf})
