"""moto's S3 server on 127.0.0.1 for the whole run, the suite's Spark session pointed at it (the S3A
settings of a custom endpoint: path-style access, no TLS, plain credentials), and a fresh prefix of
its bucket for each test, read back with delta-rs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.moto import KEY, s3a_settings, start_moto

BUCKET = "lake"


@dataclass(frozen=True)
class S3:
    """The running server: its endpoint, and what each client needs to reach it."""

    endpoint: str
    log: Path | None = None

    @property
    def settings(self) -> dict[str, str]:
        """S3A's settings for the endpoint (``fs.s3a.`` names)."""
        return s3a_settings(self.endpoint)

    @property
    def spark_conf(self) -> dict[str, str]:
        return {f"spark.hadoop.{k}": v for k, v in self.settings.items()}

    @property
    def storage_options(self) -> dict[str, str]:
        """delta-rs's options for the endpoint."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": KEY,
            "AWS_REGION": "us-east-1",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY,
            aws_secret_access_key=KEY,
            region_name="us-east-1",
        )


@pytest.fixture(scope="session")
def s3(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    """moto's S3 server for the run, with the bucket ``lake``; the suite's session reaches it."""
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    server, endpoint = start_moto(log)
    try:
        found = S3(endpoint, log)
        found.client().create_bucket(Bucket=BUCKET)
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in found.settings.items():
            hadoop.set(key, value)
            spark.conf.set(f"spark.hadoop.{key}", value)
        yield found
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def lake(s3: S3, request: pytest.FixtureRequest) -> str:
    """A prefix of the bucket of this test's own: ``s3a://lake/<test>``."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return f"s3a://{BUCKET}/{name}-{time.monotonic_ns()}"
