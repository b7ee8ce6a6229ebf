"""Writers in several drivers on one S3 table: with ``[spark] s3_commits = "conditional"`` each
commit is a put-if-absent (S3's conditional write, which moto's server implements: a second PUT with
``If-None-Match: *`` gets 412), so that of two drivers committing one version one wins and the other
commits after it; Delta's default S3 log store checks, then writes, and two drivers both succeed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import deltalake
import pytest
from py4j.protocol import Py4JJavaError

from lakemerge.spark import logstore
from tests import oracle
from tests.s3.conftest import BUCKET, S3

pytestmark = pytest.mark.s3

SOURCE = str(Path(__file__).resolve().parents[2] / "src")


def _store(spark: Any) -> Any:
    """An instance of the conditional log store, loaded into the test's JVM from its jar."""
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    urls = gateway.new_array(jvm.java.net.URL, 1)
    urls[0] = jvm.java.io.File(str(logstore.jar())).toURI().toURL()
    loader = jvm.java.net.URLClassLoader(urls, jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
    args = gateway.new_array(jvm.java.lang.Object, 1)
    args[0] = spark.sparkContext._jsc.hadoopConfiguration()
    return loader.loadClass(logstore.CLASS).getConstructors()[0].newInstance(args)


def _lines(spark: Any, *lines: str) -> Any:
    found = spark._jvm.java.util.ArrayList()
    for line in lines:
        found.add(line)
    return found.iterator()


def test_a_version_is_written_once_and_a_second_writer_is_told_it_exists(spark: Any, s3: S3, lake: str) -> None:
    store = _store(spark)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = spark._jvm.org.apache.hadoop.fs.Path(f"{lake}/_delta_log/00000000000000000000.json")
    store.write(path, _lines(spark, '{"first":1}'), False, conf)
    with pytest.raises(Py4JJavaError) as lost:
        store.write(path, _lines(spark, '{"second":1}'), False, conf)
    assert lost.value.java_exception.getClass().getName() == "java.nio.file.FileAlreadyExistsException"
    key = f"{lake.split('/', 3)[3]}/_delta_log/00000000000000000000.json"
    assert s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read() == b'{"first":1}\n'
    assert not store.isPartialWriteVisible(path, conf)


def test_without_it_two_writers_of_one_version_both_succeed(spark: Any, s3: S3, lake: str) -> None:
    """What Delta's default S3 log store does in each driver: no object at the version's path, so it
    creates it (S3A's create without overwrite checks first); two drivers that checked before either
    wrote both succeed, and the later object replaces the earlier: a commit is lost."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = spark._jvm.org.apache.hadoop.fs.Path(f"{lake}/_delta_log/00000000000000000000.json")
    fs = path.getFileSystem(conf)
    one, two = fs.create(path, False), fs.create(path, False)
    one.write(b"first\n")
    two.write(b"second\n")
    one.close()
    two.close()
    key = f"{lake.split('/', 3)[3]}/_delta_log/00000000000000000000.json"
    assert s3.client().get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"second\n"


def _run(pipeline: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SOURCE, "LAKEMERGE_CONFIG": str(cwd / "none.toml")}
    env.pop("SPARK_REMOTE", None)
    command = [sys.executable, "-m", "lakemerge.cli.app", "run", str(pipeline), "--json"]
    return subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.processes
def test_two_drivers_racing_on_one_s3_table_land_every_batch_once(
    spark: Any, s3: S3, lake: str, tmp_path: Path
) -> None:
    """Rounds of two ``lakemerge run`` processes (each its own JVM) started together on one table,
    files arriving between rounds: every file applied exactly once, delta-rs reads every version, and
    the table equals the oracle's."""
    rounds = int(os.environ.get("LAKEMERGE_S3_RACE_ROUNDS", "4"))
    (tmp_path / "none.toml").write_text("[spark]\n")
    conf = "".join(f'"{k}" = "{v}"\n' for k, v in s3.spark_conf.items())
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[spark]\nmaster = "local[1]"\ns3_commits = "conditional"\n[spark.conf]\n'
        f'{conf}"spark.sql.shuffle.partitions" = "1"\n'
        f'[tables.t]\npath = "{lake}/t"\nkey = "k"\nsequence = "seq"\nmax_files_per_batch = 1\n'
        f'[tables.t.feed]\nlocation = "{lake}/in"\nformat = "csv"\nheader = true\nop_column = "op"\n'
        'types = { k = "int", seq = "bigint" }\n'
    )
    client = s3.client()
    prefix = lake.split("/", 3)[3]
    state: oracle.State = {}
    landed: list[str] = []
    for round_ in range(rounds):
        for n in range(2):
            name = f"in/r{round_}_{n}.csv"
            k, seq = round_ * 10 + n, round_ * 10 + n + 1
            # (each file updates key 0 too: a lost commit would leave an older value there)
            body = f"k,seq,op,v\n{k + 1},{seq},I,r{round_}\n0,{seq},U,{name}\n"
            client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=body.encode())
            rows = [{"k": k + 1, "seq": seq, "op": "I", "v": f"r{round_}"}, {"k": 0, "seq": seq, "op": "U", "v": name}]
            state, _ = oracle.apply_batch(state, [(name, rows)], key=("k",), seq="seq", op="op", tombstones={})
            landed.append(f"{lake}/{name}")
        writers = [_run(pipeline, tmp_path) for _ in range(2)]
        outputs = [w.communicate(timeout=900) for w in writers]
        for writer, (out, err) in zip(writers, outputs, strict=True):
            assert writer.returncode == 0, err
            assert json.loads(out)
    import lakemerge

    applied = [f.path for c in lakemerge.history(f"{lake}/t", spark=spark) for f in c.files]
    assert sorted(applied) == sorted(landed), "every file applied exactly once"
    table = deltalake.DeltaTable(f"{lake}/t", storage_options=s3.storage_options)
    latest = table.version()
    assert latest + 1 == len(landed), "one commit per batch, none lost"
    for version in range(latest + 1):
        read = deltalake.DeltaTable(f"{lake}/t", version=version, storage_options=s3.storage_options)
        assert read.to_pyarrow_table().num_rows == version + 2
    rows = oracle.sort_rows(table.to_pyarrow_table().to_pylist(), ["k", "seq", "v"])
    assert rows == oracle.state_rows(state, ["k", "seq", "v"])
    if s3.log is not None:  # (how often the two drivers met on one version: S3 refused the later put)
        refused = [line for line in s3.log.read_text().splitlines() if "/t/_delta_log/" in line and '" 412 ' in line]
        print(f"commits refused by S3 (a driver that lost a version and committed the next): {len(refused)}")
