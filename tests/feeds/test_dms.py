"""AWS DMS feeds on files laid out as DMS's S3 target writes them: full-load files
``LOAD00000001.csv`` and change files named by time, which sort before them; a delete repeats the
row's last values; the endpoint's settings (IncludeOpForFullLoad, CdcInsertsOnly,
CdcInsertsAndUpdates, TimestampColumnName, PreserveTransactions). Each table is read back with
delta-rs after every batch and compared with the oracle, in which a full load precedes every
change of its table."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.errors import ConfigError, InputError
from tests.helpers import read_table, write_lines
from tests.oracle import Oracle

SCHEMA = "id INT, name STRING, updated_at TIMESTAMP"


def at(minute: int) -> dt.datetime:
    return dt.datetime(2024, 3, 1, 10, minute, tzinfo=dt.UTC)


def line(op: str | None, row: tuple[Any, ...]) -> str:
    fields = [str(v) if not isinstance(v, dt.datetime) else v.strftime("%Y-%m-%d %H:%M:%S.%f") for v in row]
    return ",".join(([op] if op else []) + fields)


def config(tmp_path: Path, sequence: tuple[str, ...] = ("updated_at",), **feed: Any) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="customers",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=sequence,
        feed=lakemerge.FeedConfig(
            location=(str(tmp_path / "in"),), format="csv", envelope="dms", schema=feed.pop("schema", SCHEMA), **feed
        ),
    )


class Dms:
    """DMS's folder for one table, applied batch by batch and checked against the oracle, whose
    sequence puts the full load first: (0, updated_at) for full-load rows, (1, updated_at) for
    changes; with ``sequence = []``, 0 for full-load files and the batch's number for changes."""

    def __init__(self, spark: Any, tmp_path: Path, config: lakemerge.TableConfig, *, load_op: bool = False) -> None:
        self.spark, self.tmp_path, self.config, self.load_op = spark, tmp_path, config, load_op
        self.oracle = Oracle(key=("id",), seq="_order", op="op")
        self.number = 0

    def batch(self, files: dict[str, list[tuple[str, tuple[Any, ...]]]], *, cdc_op: bool = True) -> Any:
        self.number += 1
        ordered = []
        for name in sorted(files):  # (file order: by name, change files before full-load files)
            load = name.startswith("LOAD")
            lines = [line(op if (self.load_op if load else cdc_op) else None, row) for op, row in files[name]]
            write_lines(self.tmp_path / "in" / name, lines)
            rows = []
            for op, (key, name_, stamp) in files[name]:
                row: dict[str, Any] = {"id": key, "name": name_, "updated_at": stamp, "op": op}
                if self.config.sequence:
                    row["_order"], row["_lm_phase"] = (0 if load else 1, stamp), 0 if load else 1
                else:
                    row["_order"] = row["_lm_sequence"] = 0 if load else self.number
                rows.append(row)
            ordered.append(rows)
        result = lakemerge.apply_table(self.config, spark=self.spark)
        counts = self.oracle.apply(ordered)
        m = result.metrics
        assert (m.inserted, m.updated, m.deleted, m.late) == (
            counts.inserted,
            counts.updated,
            counts.deleted,
            counts.late,
        )
        expected = [{k: v for k, v in r.items() if k != "_order"} for r in self.oracle.rows()]
        assert sorted(read_table(self.config.path), key=lambda r: r["id"]) == sorted(expected, key=lambda r: r["id"])
        return result


def full_load_then_changes(dms: Dms) -> None:
    """A full load and changes in one batch (the change files' names sort first), deletes that
    repeat the full load's ``updated_at``, then a late full-load file holding a deleted key, a
    re-inserted key, a change older than the full load's row, and a primary-key change."""
    load = [("I", (n, f"c{n}", at(1))) for n in range(1, 16)]
    dms.batch(
        {
            "20240301-100000001.csv": [("U", (1, "c1-new", at(2))), ("D", (8, "c8", at(1))), ("D", (14, "c14", at(1)))],
            "20240301-100500002.csv": [("I", (20, "c20", at(3))), ("U", (20, "c20-b", at(3)))],
            "LOAD00000001.csv": load[:10],
            "LOAD00000002.csv": load[10:],
        }
    )
    dms.batch(
        {
            "LOAD0000000A.csv": [("I", (8, "c8", at(1))), ("I", (16, "c16", at(1)))],  # late: 8 stays deleted
            "20240301-101000003.csv": [
                ("U", (15, "c15-new", at(0))),  # DMS's commit order, not updated_at, puts it after the load
                ("I", (14, "c14-back", at(9))),  # the deleted key comes back
                ("D", (2, "c2", at(1))),  # primary key 2 becomes 200: DMS writes the old key's delete
                ("I", (200, "c2", at(9))),
            ],
        }
    )


def test_full_load_precedes_every_change(spark: Any, tmp_path: Path) -> None:
    dms = Dms(spark, tmp_path, config(tmp_path))
    full_load_then_changes(dms)
    ids = {r["id"] for r in read_table(dms.config.path)}
    assert {8, 2} & ids == set() and {14, 15, 200} <= ids


def test_full_load_precedes_every_change_without_a_sequence(spark: Any, tmp_path: Path) -> None:
    dms = Dms(spark, tmp_path, config(tmp_path, sequence=()))
    full_load_then_changes(dms)
    assert 8 not in {r["id"] for r in read_table(dms.config.path)}


def test_include_op_for_full_load(spark: Any, tmp_path: Path) -> None:
    files = {
        "LOAD00000001.csv": [("I", (1, "a", at(1))), ("I", (2, "b", at(1)))],
        "20240301-1.csv": [("D", (2, "b", at(1)))],
    }
    plain = Dms(spark, tmp_path / "plain", config(tmp_path / "plain"), load_op=True)
    with pytest.raises(InputError, match=r"LOAD00000001\.csv, row 1: .*set feed\.dms\.include_op_for_full_load = true"):
        plain.batch(files)
    dms = Dms(spark, tmp_path, config(tmp_path, dms={"include_op_for_full_load": True}), load_op=True)
    dms.batch(files)
    assert [r["id"] for r in read_table(dms.config.path)] == [1]


@pytest.mark.parametrize("setting", ["cdc_inserts_only", "cdc_inserts_and_updates"])
@pytest.mark.parametrize("include_op", [False, True])
def test_cdc_inserts_only_and_inserts_and_updates(spark: Any, tmp_path: Path, setting: str, include_op: bool) -> None:
    """Change files without the ``Op`` column (unless IncludeOpForFullLoad): inserts (and updates)."""
    dms = Dms(
        spark,
        tmp_path,
        config(tmp_path, dms={setting: True, "include_op_for_full_load": include_op}),
        load_op=include_op,
    )
    changes = [("I", (3, "c", at(2)))] + ([("U", (1, "a-new", at(3)))] if setting == "cdc_inserts_and_updates" else [])
    dms.batch({"LOAD00000001.csv": [("I", (1, "a", at(1)))], "20240301-1.csv": changes}, cdc_op=include_op)
    dms.batch({"20240301-2.csv": [("I", (4, "d", at(4)))]}, cdc_op=include_op)
    with_op = Dms(spark, tmp_path / "wrong", config(tmp_path / "wrong", dms={setting: True}))
    with pytest.raises(InputError, match=r"20240301-1\.csv, row 1: .*cdc_inserts_only or cdc_inserts_and_updates"):
        with_op.batch({"20240301-1.csv": [("I", (1, "a", at(1)))]}, cdc_op=True)


def test_timestamp_column(spark: Any, tmp_path: Path) -> None:
    """TimestampColumnName: a full load's rows carry their transfer time, later than the commit time
    of changes made during the load, which DMS applies after it: they still win."""
    schema = "dms_ts TIMESTAMP, id INT, name STRING"
    t = config(tmp_path, sequence=("dms_ts",), schema=schema, dms={"timestamp_column_name": "dms_ts"})
    write_lines(
        tmp_path / "in" / "LOAD00000001.csv", ["2024-03-01 10:30:00.000000,1,loaded", "2024-03-01 10:30:00.000000,2,x"]
    )
    write_lines(
        tmp_path / "in" / "20240301-102000001.csv",
        ["U,2024-03-01 10:20:00.123456,1,changed-during-load", "D,2024-03-01 10:21:00.000000,2,x"],
    )
    lakemerge.apply_table(t, spark=spark)
    assert read_table(t.path) == [
        {
            "dms_ts": dt.datetime(2024, 3, 1, 10, 20, 0, 123456, tzinfo=dt.UTC),
            "id": 1,
            "name": "changed-during-load",
            "_lm_phase": 1,
        }
    ]
    missing = config(tmp_path / "m", schema="id INT, name STRING", dms={"timestamp_column_name": "dms_ts"})
    write_lines(tmp_path / "m" / "in" / "LOAD00000001.csv", ["1,a"])
    with pytest.raises(InputError, match=r"'dms_ts' \(feed\.dms\.timestamp_column_name, DMS's TimestampColumnName\)"):
        lakemerge.apply_table(missing, spark=spark)


def test_preserve_transactions_is_refused_naming_the_setting(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PreserveTransactions"):
        config(tmp_path, dms={"preserve_transactions": True})
    write_lines(tmp_path / "in" / "CDC_TXN-20201117153046033.csv", ["I,Names_03cdcad11a,rdsTempsdb,13,Daniel"])
    with pytest.raises(InputError, match=r"CDC_TXN-20201117153046033\.csv: .*PreserveTransactions"):
        lakemerge.apply_table(config(tmp_path), spark=spark)
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[tables.t]\npath = "t"\nkey = "id"\n[tables.t.feed]\nlocation = "in"\nenvelope = "dms"\n'
        'schema = "id INT"\n[tables.t.feed.dms]\ncdc_inserts_only = true\ncdc_inserts_and_updates = true\n'
    )
    with pytest.raises(ConfigError, match=r"key 'tables\.t\.feed\.dms': .*CdcInsertsOnly or CdcInsertsAndUpdates"):
        lakemerge.load_pipeline(pipeline)


def test_parquet_full_load_with_op_and_timestamp_column(spark: Any, tmp_path: Path) -> None:
    """Parquet files name their columns: the ``Op`` column is found by name in each file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "in"
    folder.mkdir()
    load = {"Op": ["I", "I"], "ts": ["2024-03-01 10:30:00.000000"] * 2, "id": [1, 2], "name": ["a", "b"]}
    pq.write_table(pa.table(load), folder / "LOAD00000001.parquet")
    cdc = {
        "Op": ["D", "U"],
        "ts": ["2024-03-01 10:00:00.000000", "2024-03-01 10:00:01.000000"],
        "id": [1, 2],
        "name": ["a", "b2"],
    }
    pq.write_table(pa.table(cdc), folder / "20240301-100001.parquet")
    t = lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=("ts",),
        feed=lakemerge.FeedConfig(
            location=(str(folder),), format="parquet", envelope="dms", dms={"timestamp_column_name": "ts"}
        ),
    )
    lakemerge.apply_table(t, spark=spark)
    assert [(r["id"], r["name"], r["ts"].minute) for r in read_table(t.path)] == [(2, "b2", 0)]
