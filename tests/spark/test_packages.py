"""The S3 jars a session gets: added for s3a: paths alone, matching the Hadoop of the Spark that runs,
the AWS SDK's bundle excluded, and never beside a hadoop-aws the settings bring themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakemerge.config import SparkSettings
from lakemerge.errors import ConfigError
from lakemerge.spark import versions
from lakemerge.spark.packages import with_storage


def test_s3a_paths_add_hadoop_aws_and_the_sdk_s_s3_client() -> None:
    settings = with_storage(SparkSettings(conf={"spark.jars.excludes": "a:b"}), ["/x", "s3a://lake/t"], "3.5.0")
    assert settings.packages == (
        "org.apache.hadoop:hadoop-aws:3.5.0",
        "software.amazon.awssdk:s3:2.35.4",
        "software.amazon.awssdk:s3-transfer-manager:2.35.4",
    )
    assert settings.conf["spark.jars.excludes"] == "a:b,software.amazon.awssdk:bundle"
    assert with_storage(SparkSettings(), ["S3A://lake/t"], "3.4.2").packages[0] == "org.apache.hadoop:hadoop-aws:3.4.2"


@pytest.mark.parametrize(
    "own",
    [
        SparkSettings(packages=("org.apache.hadoop:hadoop-aws:3.5.0",)),
        SparkSettings(conf={"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0,x:y:1"}),
        SparkSettings(conf={"spark.jars": "/opt/jars/hadoop-aws-3.5.0.jar"}),
    ],
)
def test_settings_that_bring_their_own_s3a_are_left_alone(own: SparkSettings) -> None:
    assert with_storage(own, ["s3a://lake/t"], "3.5.0") == own


def test_other_paths_add_nothing() -> None:
    settings = SparkSettings()
    assert with_storage(settings, ["/lake/t", "file:/x", "hdfs://nn/t", "gs://b/t"], "3.5.0") == settings


def test_an_unknown_hadoop_is_refused_naming_what_to_do() -> None:
    with pytest.raises(ConfigError, match=r"spark\.jars\.packages"):
        with_storage(SparkSettings(), ["s3a://lake/t"], "9.9.9")


def test_the_hadoop_release_is_read_from_the_installed_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "hadoop-client-api-3.4.2.jar").write_bytes(b"")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert versions.installed_hadoop() == "3.4.2"
    monkeypatch.delenv("SPARK_HOME")
    import pyspark

    bundled = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    assert versions.installed_hadoop() == bundled[0].name[len("hadoop-client-api-") : -len(".jar")]
    assert all(p.hadoop in versions.AWS_SDK for p in versions.PAIRINGS.values())
