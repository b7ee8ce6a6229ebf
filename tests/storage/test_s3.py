"""A landing zone on S3 (moto's S3 server on 127.0.0.1), reached through ``pyarrow.fs`` with the
session's S3A settings: an empty or absent prefix holds no file (an object store has no empty
folders), keys holding ':' are listed and moved like any other, archive moves keep their place and
never go over an object, and a location's files are listed with Hadoop's spellings."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakemerge.feeds.files import location_files
from lakemerge.storage.arrow import ArrowFileSystem, s3_options

pytestmark = pytest.mark.s3

BUCKET = "landing"


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 for this module, with one bucket."""
    command = shutil.which("moto_server") or os.path.join(os.path.dirname(sys.executable), "moto_server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("wb")
    server = subprocess.Popen([command, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"moto's server did not start (see {log.name})") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture
def s3(spark: Any, endpoint: str) -> Iterator[ArrowFileSystem]:
    """The S3 filesystem of the session's S3A settings, over an emptied bucket."""
    from pyarrow import fs

    settings = {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": "testing",
        "spark.hadoop.fs.s3a.secret.key": "testing",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
    }
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        options = s3_options({k[len("spark.hadoop.fs.s3a.") :]: v for k, v in settings.items()}, BUCKET)
        raw = fs.S3FileSystem(**options, allow_bucket_creation=True)
        raw.create_dir(BUCKET)
        raw.delete_dir_contents(BUCKET, missing_dir_ok=True)
        yield ArrowFileSystem(spark, "s3a")
    finally:
        for key in settings:
            spark.conf.unset(key)


def _put(endpoint: str, key: str, data: bytes = b"id\n1\n") -> None:
    """An object written as a single PUT (as most writers of landing zones do)."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    client.put_object(Bucket=BUCKET, Key=key, Body=data)


def test_s3a_settings_map_to_pyarrow_s() -> None:
    settings = {
        "endpoint": "https://minio.local:9000/",
        "path.style.access": "true",
        "access.key": "a",
        "secret.key": "s",
        "session.token": "t",
        "bucket.other.endpoint": "other:9000",
        "bucket.other.connection.ssl.enabled": "false",
        "bucket.other.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider",
    }
    assert s3_options(settings, "lake") == {
        "endpoint_override": "minio.local:9000",
        "force_virtual_addressing": False,
        "scheme": "https",
        "access_key": "a",
        "secret_key": "s",
        "session_token": "t",
    }
    assert s3_options(settings, "other") == {
        "endpoint_override": "other:9000",
        "force_virtual_addressing": False,
        "scheme": "http",
        "anonymous": True,
    }
    assert s3_options({}, "lake") == {"scheme": "https"}


def test_an_empty_or_absent_prefix_holds_no_file(s3: ArrowFileSystem, endpoint: str) -> None:
    ignored: dict[str, str] = {}
    assert location_files(s3, f"s3a://{BUCKET}/orders", ignored) == []
    assert location_files(s3, f"s3a://{BUCKET}/orders/*.csv", ignored) == []
    assert location_files(s3, f"s3a://{BUCKET}/orders/2024-*/x.csv", ignored) == []
    _put(endpoint, "orders/2024-01-01T10:00:00.csv")
    _put(endpoint, "orders/a/_tmp/x.csv")
    _put(endpoint, "orders/a/b/y.csv", b"id\n1\n2\n")
    found = location_files(s3, f"s3a://{BUCKET}/orders", ignored)
    assert [(e.path, e.size) for e in sorted(found, key=lambda e: e.path)] == [
        (f"s3a://{BUCKET}/orders/2024-01-01T10:00:00.csv", 5),
        (f"s3a://{BUCKET}/orders/a/b/y.csv", 7),
    ]
    assert list(ignored) == [f"s3a://{BUCKET}/orders/a/_tmp"], "a hidden folder once, as itself"
    assert [e.name for e in location_files(s3, f"s3a://{BUCKET}/orders/*.csv", {})] == ["2024-01-01T10:00:00.csv"]
    assert all(e.modified > 0 for e in found)


def test_objects_move_keeping_their_place_and_never_over_another(s3: ArrowFileSystem, endpoint: str) -> None:
    from lakemerge.storage.filesystem import StorageError

    _put(endpoint, "in/a/x:1.csv")
    _put(endpoint, "in/b/x:1.csv", b"other")
    s3.move(f"s3a://{BUCKET}/in/a/x:1.csv", f"s3a://{BUCKET}/archive/a/x:1.csv")
    with pytest.raises(StorageError, match="exists"):
        s3.move(f"s3a://{BUCKET}/in/b/x:1.csv", f"s3a://{BUCKET}/archive/a/x:1.csv")
    assert s3.status(f"s3a://{BUCKET}/in/a/x:1.csv") is None
    moved = s3.status(f"s3a://{BUCKET}/archive/a/x:1.csv")
    assert moved is not None and moved.size == 5
    with s3.open(f"s3a://{BUCKET}/in/b/x:1.csv") as file:
        assert file.read() == b"other"


def test_an_unreachable_store_is_one_line(spark: Any, tmp_path: Path) -> None:
    from lakemerge.storage.filesystem import StorageError

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = {"endpoint": f"http://127.0.0.1:{port}", "connection.establish.timeout": "1000", "attempts.maximum": "1"}
    for key, value in settings.items():
        spark.conf.set(f"spark.hadoop.fs.s3a.{key}", value)
    try:
        with pytest.raises(StorageError) as info:
            ArrowFileSystem(spark, "s3a").status(f"s3a://{BUCKET}/x")
    finally:
        for key in settings:
            spark.conf.unset(f"spark.hadoop.fs.s3a.{key}")
    assert "\n" not in str(info.value) and str(info.value)
