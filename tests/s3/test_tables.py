"""Tables, landing zones, archives and checkpoints on S3 (moto's server on 127.0.0.1) through the
command line, each table read back with delta-rs (the endpoint in its storage options) and compared
with the plain-Python oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow
import pytest
from typer.testing import CliRunner

from lakemerge.cli.app import app
from tests import oracle
from tests.s3.conftest import BUCKET, S3

pytestmark = pytest.mark.s3

COLUMNS = ["k", "seq", "v"]
#: A name holding every character Hadoop's globs or URIs treat specially, spaces and other scripts.
ODD = "b [1]{2}*?\\ 50% #ü名_1.csv"


def key_of(lake: str, rel: str) -> str:
    return f"{lake.split('/', 3)[3]}/{rel}"


def put(s3: S3, lake: str, rel: str, rows: list[tuple[int, int, str, str]]) -> list[dict[str, Any]]:
    """A CSV change file at ``lake/rel``: rows of (k, seq, op, v); its rows as the oracle reads them."""
    text = "k,seq,op,v\n" + "".join(f"{k},{seq},{op},{v}\n" for k, seq, op, v in rows)
    s3.client().put_object(Bucket=BUCKET, Key=key_of(lake, rel), Body=text.encode())
    return [{"k": k, "seq": seq, "op": op, "v": v} for k, seq, op, v in rows]


def objects(s3: S3, lake: str, rel: str) -> list[str]:
    prefix = key_of(lake, rel)
    found = s3.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/").get("Contents", [])
    return sorted(o["Key"][len(prefix) + 1 :] for o in found)


def pipeline(root: Path, lake: str, table: str = "", feed: str = "") -> Path:
    path = root / "p.toml"
    path.write_text(
        f'[tables.t]\npath = "{lake}/t"\nkey = "k"\nsequence = "seq"\nmax_files_per_batch = 1\n{table}\n'
        f'[tables.t.feed]\nlocation = "{lake}/in"\narchive = "{lake}/archive"\nformat = "csv"\nheader = true\n'
        f'op_column = "op"\ntypes = {{ k = "int", seq = "bigint" }}\n{feed}\n'
    )
    return path


def paths(batch: dict[str, Any]) -> list[str]:
    return [f["path"] for f in batch["files"]]


def cli(*args: str, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def rows(s3: S3, path: str, columns: list[str] = COLUMNS) -> list[dict[str, Any]]:
    """The table's rows, read by delta-rs's query engine (which applies deletion vectors)."""
    table = deltalake.DeltaTable(path, storage_options=s3.storage_options)
    found = deltalake.QueryBuilder().register("t", table).execute(f"SELECT {', '.join(columns)} FROM t").read_all()
    return oracle.sort_rows(pyarrow.table(found).to_pylist(), columns)


def expected(batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    state: oracle.State = {}
    for batch in batches:
        state, _ = oracle.apply_batch(state, [("f", batch)], key=("k",), seq="seq", op="op", tombstones={})
    return oracle.state_rows(state, COLUMNS)


@pytest.mark.parametrize("mode", ["copy_on_write", "deletion_vectors", "log"])
def test_every_write_mode_on_s3(spark: Any, s3: S3, lake: str, tmp_path: Path, mode: str) -> None:
    """Two batches, the first a file whose name holds glob characters, spaces, %, # and other scripts,
    both in subfolders: applied once, recorded under their real names, archived keeping their folders,
    not applied again; a log table reads the same after compaction."""
    first = put(s3, lake, f"in/a/{ODD}", [(1, 1, "I", "a"), (2, 1, "I", "b"), (3, 1, "I", "c")])
    second = put(s3, lake, "in/b/c_2.csv", [(2, 2, "U", "B"), (3, 2, "D", ""), (4, 2, "I", "d")])
    config = pipeline(tmp_path, lake, table=f'write_mode = "{mode}"')
    done = cli("run", str(config))
    assert [b["version"] is not None for b in done["batches"]] == [True, True]
    assert [paths(b) for b in done["batches"]] == [[f"{lake}/in/a/{ODD}"], [f"{lake}/in/b/c_2.csv"]]
    want = expected([first, second])
    if mode == "log":
        logged = deltalake.DeltaTable(f"{lake}/t__log", storage_options=s3.storage_options)
        assert logged.to_pyarrow_table().num_rows == 6, "both batches in the change log on S3"
        cli("compact", str(config))
    assert rows(s3, f"{lake}/t") == want
    assert [o for o in objects(s3, lake, "archive") if not o.endswith("/")] == [f"a/{ODD}", "b/c_2.csv"]
    assert [o for o in objects(s3, lake, "in") if not o.endswith("/")] == []
    history = cli("history", f"{lake}/t")
    applied = sorted(f["path"] for c in history["commits"] for f in c["files"])
    if mode != "log":
        assert applied == [f"{lake}/in/a/{ODD}", f"{lake}/in/b/c_2.csv"]
    assert cli("run", str(config))["batches"] == []
    assert rows(s3, f"{lake}/t") == want
    saved = [o for o in objects(s3, lake, "t/_lakemerge_ledger") if o.endswith(".json.gz")]
    assert len(saved) == 1, "the ledger walk saved beside the table, on S3"
    from lakemerge.table import ledger

    ledger._WALKS.clear()  # (a new process: it starts from the saved walk)
    assert sorted(ledger.ledger(spark, f"{lake}/t").files) == sorted(applied if mode != "log" else [])


def test_quarantine_skip_and_archive_on_s3(spark: Any, s3: S3, lake: str, tmp_path: Path) -> None:
    """A bad row goes to the quarantine table on S3; a file no batch can read fails every run naming it
    until ``lakemerge skip`` records it; an archived name already taken is never written over."""
    good = put(s3, lake, "in/a_1.csv", [(1, 1, "I", "a"), (2, 1, "I", "b")])
    s3.client().put_object(Bucket=BUCKET, Key=key_of(lake, "in/a_2.csv"), Body=b"k,seq,op,v\nx,2,U,bad\n3,2,I,c\n")
    s3.client().put_object(Bucket=BUCKET, Key=key_of(lake, "in/a_3.csv"), Body=b"k,k,seq\n1,1,1\n")
    s3.client().put_object(Bucket=BUCKET, Key=key_of(lake, "archive/a_1.csv"), Body=b"kept")
    config = pipeline(tmp_path, lake, table="max_bad_rows = 1")
    failed = CliRunner().invoke(app, ["run", str(config)])
    assert failed.exit_code == 3, failed.output
    assert f"{lake}/in/a_3.csv" in failed.output and "skip" in failed.output
    assert rows(s3, f"{lake}/t") == expected([good, [{"k": 3, "seq": 2, "op": "I", "v": "c"}]])
    quarantined = rows(s3, f"{lake}/t__quarantine", ["file", "row"])
    assert quarantined == [{"file": f"{lake}/in/a_2.csv", "row": 2}]  # (the file's line: its header is 1)
    cli("skip", str(config), "--table", "t", f"{lake}/in/a_3.csv", "--reason", "two k columns")
    cli("run", str(config))
    archived = s3.client().get_object(Bucket=BUCKET, Key=key_of(lake, "archive/a_1.csv"))["Body"].read()
    assert archived == b"kept"
    assert [o for o in objects(s3, lake, "archive") if not o.endswith("/")] == [
        "a_1.csv",
        "a_1.csv.1",
        "a_2.csv",
        "a_3.csv",
    ]


def test_rollback_vacuum_report_and_show_on_s3(spark: Any, s3: S3, lake: str, tmp_path: Path) -> None:
    """Rollback makes the undone batch's file pending again; ``vacuum --retain-hours 0`` on a table
    whose retention allows it vacuums it, its tombstone table by its own retention; the report and
    ``show`` read the table on S3."""
    first = put(s3, lake, "in/a_1.csv", [(1, 1, "I", "a"), (2, 1, "I", "b")])
    put(s3, lake, "in/a_2.csv", [(1, 2, "D", ""), (2, 2, "U", "B")])
    config = pipeline(tmp_path, lake, feed="", table="")
    config.write_text(config.read_text().replace(f'archive = "{lake}/archive"\n', ""))
    cli("run", str(config))
    rolled = cli("rollback", f"{lake}/t", "--to-version", "0", "--reapply-files")
    assert rolled["pending_again"] == [f"{lake}/in/a_2.csv"]
    assert rows(s3, f"{lake}/t") == expected([first])
    spark.sql(
        f"ALTER TABLE delta.`{lake}/t` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    vacuumed = cli("vacuum", str(config), "--retain-hours", "0")
    assert vacuumed["tables"][0]["files_deleted"] > 0
    assert rows(s3, f"{lake}/t") == expected([first])
    again = cli("run", str(config))
    assert [paths(b) for b in again["batches"]] == [[f"{lake}/in/a_2.csv"]]
    shown = cli("show", f"{lake}/t")
    assert shown["rows"] == 1
    report = cli("report", f"{lake}/t", "--out", str(tmp_path / "report.html"))
    assert report["batches"] == 3 and (tmp_path / "report.html").stat().st_size > 1000


def test_a_dataframe_batch_and_a_file_stream_on_s3(spark: Any, s3: S3, lake: str, tmp_path: Path) -> None:
    import lakemerge

    config = pipeline(tmp_path, lake)
    changes = spark.createDataFrame([(1, 1, "I", "a"), (2, 1, "I", "b")], "k INT, seq BIGINT, op STRING, v STRING")
    table = lakemerge.load_pipeline(config).table("t")
    applied = lakemerge.apply_changes(table, changes, source="job", batch_id=1, spark=spark)
    assert applied.version == 0
    assert rows(s3, f"{lake}/t") == expected(
        [[{"k": 1, "seq": 1, "op": "I", "v": "a"}, {"k": 2, "seq": 1, "op": "I", "v": "b"}]]
    )
    assert lakemerge.apply_changes(table, changes, source="job", batch_id=1, spark=spark).applied_before

    streamed = tmp_path / "s.toml"
    streamed.write_text(
        config.read_text().replace(f'archive = "{lake}/archive"\n', "")
        + f'[tables.t.stream]\nsource = "files"\ncheckpoint = "{lake}/checkpoint"\ntrigger = "available_now"\n'
    )
    put(s3, lake, "in/a_1.csv", [(2, 2, "U", "B"), (3, 2, "I", "c")])
    first = cli("stream", str(streamed))
    assert len(first["batches"]) == 1
    assert objects(s3, lake, "checkpoint"), "the checkpoint is on S3"
    again = cli("stream", str(streamed))
    assert again["batches"] == []
    want = expected(
        [
            [{"k": 1, "seq": 1, "op": "I", "v": "a"}, {"k": 2, "seq": 1, "op": "I", "v": "b"}],
            [{"k": 2, "seq": 2, "op": "U", "v": "B"}, {"k": 3, "seq": 2, "op": "I", "v": "c"}],
        ]
    )
    assert rows(s3, f"{lake}/t") == want


def test_staged_commits_folder_is_an_empty_marker(spark: Any, s3: S3, lake: str, tmp_path: Path) -> None:
    """Delta makes ``_delta_log/_staged_commits`` with every table (where catalog-managed tables stage
    their commits); on S3 that folder is a zero-byte marker object, and nothing is ever staged in it for
    a table of paths: no object is left under it, and delta-rs reads every version."""
    put(s3, lake, "in/a_1.csv", [(1, 1, "I", "a")])
    put(s3, lake, "in/a_2.csv", [(1, 2, "U", "b")])
    cli("run", str(pipeline(tmp_path, lake)))
    staged = s3.client().list_objects_v2(Bucket=BUCKET, Prefix=key_of(lake, "t/_delta_log/_staged_commits"))
    assert [(o["Key"][-17:], o["Size"]) for o in staged["Contents"]] == [("/_staged_commits/", 0)]
    table = deltalake.DeltaTable(f"{lake}/t", storage_options=s3.storage_options)
    assert table.version() == 1
    table.load_as_version(0)
    assert table.to_pyarrow_table().num_rows == 1
    local = tmp_path / "local"
    spark.range(1).write.format("delta").save(str(local))
    assert list((local / "_delta_log" / "_staged_commits").iterdir()) == []


def test_scd2_history_on_s3(spark: Any, s3: S3, lake: str, tmp_path: Path) -> None:
    from tests.history_oracle import HistoryOracle

    history = HistoryOracle(key=("k",), seq="seq", columns=("v",))
    batches = [
        put(s3, lake, "in/a_1.csv", [(1, 1, "I", "a"), (2, 1, "I", "b")]),
        put(s3, lake, "in/a_2.csv", [(1, 2, "U", "A"), (2, 2, "D", ""), (3, 2, "I", "c")]),
    ]
    for batch in batches:
        history.apply([batch])
    cli("run", str(pipeline(tmp_path, lake, table='history = "scd2"')))
    columns = ["k", "seq", "v", "__start_at", "__end_at"]
    want = oracle.sort_rows([{c: r.get(c) for c in columns} for r in history.rows()], columns)
    assert rows(s3, f"{lake}/t", columns) == want


def test_a_full_snapshot_on_s3(spark: Any, s3: S3, lake: str, tmp_path: Path) -> None:
    """A snapshot feed: keys the snapshot lacks are deleted, as of its greatest sequence."""
    first = put(s3, lake, "in/s_1.csv", [(1, 1, "U", "a"), (2, 1, "U", "b"), (3, 1, "U", "c")])
    put(s3, lake, "in/s_2.csv", [(1, 2, "U", "A"), (3, 1, "U", "c")])
    cli("run", str(pipeline(tmp_path, lake, feed="snapshot = true")))
    gone = [{"k": 2, "seq": 2, "op": "D", "v": ""}]
    second = [{"k": 1, "seq": 2, "op": "U", "v": "A"}, {"k": 3, "seq": 1, "op": "U", "v": "c"}, *gone]
    assert rows(s3, f"{lake}/t") == expected([first, second])
