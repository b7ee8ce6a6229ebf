"""History (docs/history.md): SCD type 2 tables against tests/history_oracle.py, tombstones and
their atomicity, and vacuum. Tables are read back with delta-rs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import deltalake
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakemerge
from lakemerge.table import tombstones
from tests.helpers import write_lines
from tests.history_oracle import HistoryOracle

HISTORY = ["id", "seq", "name", "note", "__start_at", "__end_at", "__current"]
SCHEMA = "id INT, seq BIGINT, op STRING, name STRING, note STRING"
_runs = itertools.count()


def scd2_table(root: Path, **extra: Any) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="dim",
        path=str(root / "dim"),
        key=("id",),
        sequence=("seq",),
        history="scd2",
        track_columns=("name",),
        feed=lakemerge.FeedConfig(
            location=(str(root / "in"),),
            format="csv",
            header=True,
            schema=SCHEMA,
            op_column="op",
            upsert_codes=("U",),
            delete_codes=("D",),
        ),
        **extra,
    )


def write_batch(folder: Path, files: list[list[dict[str, Any]]]) -> Path:
    for f, rows in enumerate(files):
        lines = ["id,seq,op,name,note"]
        lines += [
            ",".join("" if r.get(c) is None else str(r[c]) for c in ("id", "seq", "op", "name", "note")) for r in rows
        ]
        write_lines(folder / f"f_{f:02d}.csv", lines)
    return folder


def history_rows(path: str | Path) -> list[dict[str, Any]]:
    rows = deltalake.DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted(({c: r.get(c) for c in HISTORY} for r in rows), key=lambda r: (r["id"], r["__start_at"]))


def oracle_rows(oracle: HistoryOracle) -> list[dict[str, Any]]:
    return sorted(({c: r.get(c) for c in HISTORY} for r in oracle.rows()), key=lambda r: (r["id"], r["__start_at"]))


def check_partition(rows: list[dict[str, Any]]) -> None:
    """History is a partition of each key's timeline: no overlaps, one current row at most, and each
    version ends where the next starts unless a delete lies between."""
    by_key: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        by_key.setdefault(r["id"], []).append(r)
    for versions in by_key.values():
        versions.sort(key=lambda r: r["__start_at"])
        assert sum(v["__current"] for v in versions) <= 1
        for a, b in itertools.pairwise(versions):
            assert a["__end_at"] is not None and a["__end_at"] <= b["__start_at"], (a, b)
        for v in versions:
            assert v["__current"] == (v["__end_at"] is None)
            assert v["__start_at"] <= v["seq"] and (v["__end_at"] is None or v["seq"] < v["__end_at"])


change = st.fixed_dictionaries(
    {
        "id": st.integers(0, 2),
        "seq": st.integers(0, 9),
        "op": st.sampled_from(["U", "U", "U", "D"]),
        "name": st.sampled_from(["a", "b"]),
        "note": st.one_of(st.none(), st.sampled_from(["x", "y"])),
    }
)
change_sets = st.lists(
    st.lists(st.lists(change, min_size=1, max_size=4), min_size=1, max_size=2), min_size=1, max_size=3
)
snapshot_rows = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 2),
            "seq": st.integers(0, 9),
            "name": st.sampled_from(["a", "b"]),
            "note": st.one_of(st.none(), st.sampled_from(["x", "y"])),
        }
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda r: r["id"],
)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=change_sets,
    snapshots=st.lists(st.one_of(st.none(), snapshot_rows), min_size=3, max_size=3),
    partial=st.booleans(),
)
def test_scd2_random_batches_match_the_oracle(
    spark: object,
    tmp_path: Path,
    batches: list[list[list[dict[str, Any]]]],
    snapshots: list[list[dict[str, Any]] | None],
    partial: bool,
) -> None:
    """Out-of-order changes across batches (sequences drawn at random, so later batches often carry
    older changes), duplicates, deletes, untracked changes, partial updates, and full snapshots
    arriving beside the changes: history, metrics and the partition invariant after every batch."""
    root = tmp_path / f"r{next(_runs)}"
    base = scd2_table(root, ignore_null_updates=["note"] if partial else False)
    snapshot_feed = lakemerge.FeedConfig(
        location=(str(root / "snap"),),
        format="csv",
        header=True,
        schema="id INT, seq BIGINT, name STRING, note STRING",
        snapshot=True,
    )
    config = base.model_copy(update={"more_feeds": (snapshot_feed,)})
    (root / "snap").mkdir(parents=True)
    oracle = HistoryOracle(
        key=("id",), seq="seq", columns=("name", "note"), track=("name",), partial=("note",) if partial else ()
    )
    for n, files in enumerate(batches):
        write_batch(root / "in" / f"b{n}", files)
        taken = snapshots[n]
        if taken is not None:
            lines = [",".join("" if r[c] is None else str(r[c]) for c in ("id", "seq", "name", "note")) for r in taken]
            write_lines(root / "snap" / f"s_{n}.csv", ["id,seq,name,note", *lines])
        expected = oracle.apply(files, snapshot=taken)
        result = lakemerge.apply_table(config, spark=spark)
        assert result.version == n
        got = {k: v for k, v in vars(result.metrics).items() if k in expected}
        assert got == expected, f"batch {n}"
        rows = history_rows(config.path)
        assert rows == oracle_rows(oracle), f"batch {n}"
        check_partition(rows)


def test_scd2_late_changes_split_intervals_and_reapplying_changes_nothing(spark: object, tmp_path: Path) -> None:
    config = scd2_table(tmp_path)
    first = write_batch(
        tmp_path / "b0",
        [
            [
                {"id": 1, "seq": 10, "op": "U", "name": "ann", "note": "n1"},
                {"id": 1, "seq": 30, "op": "U", "name": "anna", "note": "n2"},
                {"id": 2, "seq": 10, "op": "U", "name": "bob", "note": None},
                {"id": 3, "seq": 10, "op": "U", "name": "cy", "note": None},
            ]
        ],
    )
    lakemerge.apply_table(config, inputs=[str(first)], spark=spark)
    late = write_batch(
        tmp_path / "b1",
        [
            [
                {"id": 1, "seq": 20, "op": "U", "name": "annie", "note": "n3"},  # tracked: splits [10, 30)
                {"id": 2, "seq": 15, "op": "U", "name": "bob", "note": "late note"},  # untracked: in place
                {"id": 3, "seq": 40, "op": "D"},  # closes the current version
                {"id": 3, "seq": 5, "op": "U", "name": "early", "note": None},  # before everything known
            ]
        ],
    )
    result = lakemerge.apply_table(config, inputs=[str(late)], spark=spark)
    m = result.metrics
    assert (m.late, m.updated, m.deleted, m.tombstones_written) == (2, 1, 1, 1)
    expected = [
        {"id": 1, "seq": 10, "name": "ann", "note": "n1", "__start_at": 10, "__end_at": 20, "__current": False},
        {"id": 1, "seq": 20, "name": "annie", "note": "n3", "__start_at": 20, "__end_at": 30, "__current": False},
        {"id": 1, "seq": 30, "name": "anna", "note": "n2", "__start_at": 30, "__end_at": None, "__current": True},
        {"id": 2, "seq": 15, "name": "bob", "note": "late note", "__start_at": 10, "__end_at": None, "__current": True},
        {"id": 3, "seq": 5, "name": "early", "note": None, "__start_at": 5, "__end_at": 10, "__current": False},
        {"id": 3, "seq": 10, "name": "cy", "note": None, "__start_at": 10, "__end_at": 40, "__current": False},
    ]
    assert history_rows(config.path) == expected
    current = lakemerge.read_current(spark, config).orderBy("id").collect()
    assert [(r["id"], r["name"]) for r in current] == [(1, "anna"), (2, "bob")]
    assert "__start_at" not in lakemerge.read_current(spark, config).columns

    # The same changes again, under new file names: history stays as it is.
    version = deltalake.DeltaTable(config.path).version()
    again = write_batch(
        tmp_path / "b2",
        [
            [
                {"id": 1, "seq": 20, "op": "U", "name": "annie", "note": "n3"},
                {"id": 3, "seq": 40, "op": "D"},
            ]
        ],
    )
    import shutil

    shutil.move(str(again / "f_00.csv"), str(again / "f_again.csv"))
    result = lakemerge.apply_table(config, inputs=[str(again)], spark=spark)
    assert result.version == version + 1, "the batch is recorded"
    assert history_rows(config.path) == expected
    commit = deltalake.DeltaTable(config.path).history(1)[0]
    assert commit["operation"] != "MERGE", "nothing to write: a metadata-only commit"


def test_scd2_refuses_truncate_and_bad_settings(tmp_path: Path) -> None:
    feed = lakemerge.FeedConfig(location=(str(tmp_path),), format="csv", op_column="op", truncate_codes=("T",))
    with pytest.raises(ValueError, match="truncate"):
        lakemerge.TableConfig(name="t", path=str(tmp_path / "t"), key="id", sequence="seq", history="scd2", feed=feed)
    plain = lakemerge.FeedConfig(location=(str(tmp_path),), format="csv")
    with pytest.raises(ValueError, match="track_columns needs"):
        lakemerge.TableConfig(
            name="t", path=str(tmp_path / "t"), key="id", sequence="seq", track_columns="a", feed=plain
        )
    with pytest.raises(ValueError, match="single sequence"):
        lakemerge.TableConfig(
            name="t", path=str(tmp_path / "t"), key="id", sequence=("a", "b"), history="scd2", feed=plain
        )
    with pytest.raises(ValueError, match="reserved"):
        lakemerge.TableConfig(name="t", path=str(tmp_path / "t"), key="__start_at", sequence="s", feed=plain)


# ---------------------------------------------------------------------------------------------
# Tombstones in latest tables
# ---------------------------------------------------------------------------------------------
def latest_table(
    root: Path, *, sequence: str | tuple[str, ...] = "seq", schema: str = SCHEMA, **extra: Any
) -> lakemerge.TableConfig:
    return lakemerge.TableConfig(
        name="t",
        path=str(root / "t"),
        key="id",
        sequence=sequence,
        feed=lakemerge.FeedConfig(
            location=(str(root / "in"),),
            format="csv",
            header=True,
            schema=schema,
            op_column="op",
            upsert_codes=("U",),
            delete_codes=("D",),
        ),
        **extra,
    )


def plain_rows(path: str) -> list[tuple[Any, ...]]:
    rows = deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted((r["id"], r["seq"], r["name"]) for r in rows)


def test_a_late_update_older_than_a_delete_is_not_resurrected(spark: object, tmp_path: Path) -> None:
    config = latest_table(tmp_path)
    b0 = write_batch(
        tmp_path / "b0", [[{"id": 1, "seq": 1, "op": "U", "name": "a"}, {"id": 2, "seq": 1, "op": "U", "name": "b"}]]
    )
    b1 = write_batch(tmp_path / "b1", [[{"id": 1, "seq": 5, "op": "D"}, {"id": 9, "seq": 5, "op": "D"}]])
    b2 = write_batch(
        tmp_path / "b2",
        [
            [
                {"id": 1, "seq": 3, "op": "U", "name": "zombie"},  # older than its delete: late
                {"id": 9, "seq": 4, "op": "U", "name": "zombie"},  # a delete of a key never held leaves one too
                {"id": 1, "seq": 5, "op": "U", "name": "tie"},  # an exact tie goes to the incoming change
            ]
        ],
    )
    lakemerge.apply_table(config, inputs=[str(b0)], spark=spark)
    deleted = lakemerge.apply_table(config, inputs=[str(b1)], spark=spark)
    assert (deleted.metrics.deleted, deleted.metrics.deletes_absent, deleted.metrics.tombstones_written) == (1, 1, 2)
    result = lakemerge.apply_table(config, inputs=[str(b2)], spark=spark)
    assert (result.metrics.late, result.metrics.inserted, result.metrics.superseded) == (1, 1, 1)
    assert plain_rows(config.path) == [(1, 5, "tie"), (2, 1, "b")]
    # Readers of the table never see tombstones: they live in their own table.
    assert [f.name for f in deltalake.DeltaTable(config.path).schema().fields] == ["id", "seq", "name", "note"]
    graves = deltalake.DeltaTable(config.tombstone_table).to_pyarrow_table().to_pylist()
    assert sorted((g["id"], g["seq"]) for g in graves) == [(1, 5), (9, 5)]


@pytest.mark.classic  # (the tombstones' file statistics come from Delta's checksum, read in the JVM)
def test_a_batch_newer_than_every_tombstone_reads_none_of_them(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tombstones make only older changes late: a batch whose oldest sequence is at least every
    tombstone's (by the side table's file statistics) classifies without them, with the same
    outcome; one holding an older change reads them."""
    config = latest_table(tmp_path)
    read = tombstones.read
    found: list[tombstones.Tombstones] = []

    def spied(*args: Any, **kwargs: Any) -> tombstones.Tombstones:
        found.append(read(*args, **kwargs))
        return found[-1]

    monkeypatch.setattr(tombstones, "read", spied)
    b0 = write_batch(tmp_path / "b0", [[{"id": 1, "seq": 1, "op": "U", "name": "a"}]])
    b1 = write_batch(tmp_path / "b1", [[{"id": 1, "seq": 5, "op": "D"}, {"id": 2, "seq": 4, "op": "D"}]])
    tie = write_batch(tmp_path / "b2", [[{"id": 1, "seq": 5, "op": "U", "name": "tie"}]])
    late = write_batch(tmp_path / "b3", [[{"id": 2, "seq": 3, "op": "U", "name": "zombie"}]])
    for batch in (b0, b1):
        lakemerge.apply_table(config, inputs=[str(batch)], spark=spark)
    result = lakemerge.apply_table(config, inputs=[str(tie)], spark=spark)
    assert (result.metrics.inserted, result.metrics.late) == (1, 0)  # an equal sequence is not older
    assert found[-1].rows is None
    result = lakemerge.apply_table(config, inputs=[str(late)], spark=spark)
    assert (result.metrics.inserted, result.metrics.late) == (0, 1)
    assert found[-1].rows is not None
    assert plain_rows(config.path) == [(1, 5, "tie")]


@pytest.mark.classic  # (the tombstones' file statistics come from Delta's checksum, read in the JVM)
def test_a_tombstone_with_an_equal_first_sequence_column_is_read(spark: object, tmp_path: Path) -> None:
    """With several sequence columns, the statistics bound only the first: a change equal to the
    newest tombstone there may still be older by the next column, so the tombstones are read."""
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    schema = "id INT, epoch INT, seq BIGINT, op STRING, name STRING"
    config = latest_table(tmp_path, sequence=("epoch", "seq"), schema=schema)

    def batch(name: str, *rows: str) -> str:
        write_lines(tmp_path / name / "f.csv", ["id,epoch,seq,op,name", *rows])
        return str(tmp_path / name)

    lakemerge.apply_table(config, inputs=[batch("b0", "1,1,1,U,a")], spark=spark)
    lakemerge.apply_table(config, inputs=[batch("b1", "1,2,5,D,")], spark=spark)
    assert not tombstones.cannot_make_late(spark, config, 2)
    assert tombstones.cannot_make_late(spark, config, 3)
    result = lakemerge.apply_table(config, inputs=[batch("b2", "1,2,3,U,zombie")], spark=spark)
    assert (result.metrics.inserted, result.metrics.late) == (0, 1)
    assert deltalake.DeltaTable(config.path).to_pyarrow_table().num_rows == 0


@pytest.mark.classic  # (the tombstones' file statistics come from Delta's checksum, read in the JVM)
def test_tombstone_statistics_are_trusted_only_where_they_bound_the_sequence(spark: object, tmp_path: Path) -> None:
    """A sequence at least the newest tombstone's skips the read; an older one, one of another kind
    than the statistics', or of a kind Delta's statistics round (timestamps, floating point) never does."""
    import datetime

    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    config = latest_table(tmp_path)
    lakemerge.apply_table(
        config, inputs=[str(write_batch(tmp_path / "b0", [[{"id": 1, "seq": 1, "op": "D"}]]))], spark=spark
    )
    assert tombstones.cannot_make_late(spark, config, 1)
    assert not tombstones.cannot_make_late(spark, config, 0)
    assert not tombstones.cannot_make_late(spark, config, 2.5)
    assert not tombstones.cannot_make_late(spark, config, "9")
    assert not tombstones.cannot_make_late(spark, config, datetime.datetime(2030, 1, 1))


@pytest.mark.parametrize("inline_ids", [tombstones.INLINE_IDS, 0], ids=["ids-in-filter", "ids-broadcast"])
def test_tombstones_of_a_batch_that_never_committed_are_not_honoured(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inline_ids: int
) -> None:
    """A crash between the tombstone append and the table commit leaves tombstones tagged with a
    batch id the table's history lacks: nobody honours them, and the rerun writes its own. Those of
    committed batches are honoured, whether their ids are few (in the read's filter) or many."""
    monkeypatch.setattr(tombstones, "INLINE_IDS", inline_ids)
    config = latest_table(tmp_path)
    b0 = write_batch(
        tmp_path / "b0",
        [
            [{"id": 1, "seq": 1, "op": "U", "name": "a"}, {"id": 3, "seq": 1, "op": "U", "name": "c"}],
            [{"id": 3, "seq": 2, "op": "D"}],
        ],
    )
    lakemerge.apply_table(config, inputs=[str(b0)], spark=spark)
    ghost = spark.createDataFrame([(1, 50)], "id INT, seq BIGINT")
    tombstones.append(
        spark, config, ghost, truncate=None, batch=2, batch_id="crashed", types={"id": "int", "seq": "bigint"}, count=1
    )
    b1 = write_batch(
        tmp_path / "b1",
        [
            [
                {"id": 1, "seq": 7, "op": "U", "name": "kept"},
                {"id": 2, "seq": 7, "op": "U", "name": "new"},
                {"id": 3, "seq": 1, "op": "U", "name": "older than its delete"},
            ]
        ],
    )
    result = lakemerge.apply_table(config, inputs=[str(b1)], spark=spark)
    assert (result.metrics.updated, result.metrics.inserted, result.metrics.late) == (1, 1, 1)
    assert plain_rows(config.path) == [(1, 7, "kept"), (2, 7, "new")]


@pytest.mark.parametrize("inline_ids", [tombstones.INLINE_IDS, 0], ids=["ids-in-filter", "ids-broadcast"])
def test_vacuum_drops_orphans_and_expired_tombstones(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inline_ids: int
) -> None:
    """Both ways of telling committed batches (their ids in the filter, or broadcast as a table)."""
    monkeypatch.setattr(tombstones, "INLINE_IDS", inline_ids)
    config = latest_table(tmp_path, tombstone_retention_days=1)
    b0 = write_batch(tmp_path / "b0", [[{"id": 1, "seq": 1, "op": "U", "name": "a"}, {"id": 1, "seq": 2, "op": "D"}]])
    lakemerge.apply_table(config, inputs=[str(b0)], spark=spark)
    ghost = spark.createDataFrame([(3, 50)], "id INT, seq BIGINT")
    tombstones.append(
        spark, config, ghost, truncate=None, batch=1, batch_id="crashed", types={"id": "int", "seq": "bigint"}, count=1
    )
    result = lakemerge.vacuum(config, spark=spark)
    assert (result.tombstones_removed, result.tombstones_kept) == (1, 1), "the orphan goes, the real one stays"
    kept = deltalake.DeltaTable(config.tombstone_table).to_pyarrow_table().to_pylist()
    assert [(g["id"], g["_lm_confirmed"]) for g in kept] == [(1, True)]
    # Two days later the tombstone has expired: vacuum removes it, and an old update comes back.
    later = lakemerge.vacuum(config, spark=spark, now_ms=kept[0]["_lm_written_at"] + 2 * 86_400_000)
    assert later.tombstones_removed == 1
    b1 = write_batch(tmp_path / "b1", [[{"id": 1, "seq": 1, "op": "U", "name": "old"}]])
    assert lakemerge.apply_table(config, inputs=[str(b1)], spark=spark).metrics.inserted == 1


def test_vacuum_through_the_cli(spark: object, tmp_path: Path) -> None:
    from tests.semantics.test_seed import cli

    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        f'[tables.t]\npath = "{tmp_path / "t"}"\nkey = "id"\nsequence = "seq"\n'
        f'[tables.t.feed]\nlocation = "{tmp_path / "in"}"\nformat = "csv"\nheader = true\nop_column = "op"\n'
        'upsert_codes = ["U"]\ndelete_codes = ["D"]\n'
        f'schema = "{SCHEMA}"\n'
    )
    write_batch(tmp_path / "in", [[{"id": 1, "seq": 1, "op": "U", "name": "a"}, {"id": 2, "seq": 1, "op": "D"}]])
    code, out = cli("run", str(pipeline), "--json")
    assert code == 0, out
    code, out = cli("vacuum", str(pipeline), "-t", "t", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["tables"][0]["tombstones_kept"] == 1
    code, out = cli("vacuum", str(pipeline), "-t", "nope")
    assert code != 0 and "nope" in out


def test_scd2_crash_after_the_tombstones_then_rerun_equals_the_oracle(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between the tombstone append and the table commit, then a rerun: the history of a
    run that never crashed (the crashed batch's tombstones count for nothing)."""
    from lakemerge.write import scd2

    batches = [
        [[{"id": 1, "seq": 1, "op": "U", "name": "a"}, {"id": 2, "seq": 1, "op": "U", "name": "b"}]],
        [
            [
                {"id": 1, "seq": 5, "op": "D"},
                {"id": 2, "seq": 3, "op": "U", "name": "b2"},
                {"id": 3, "seq": 4, "op": "D"},
            ]
        ],
        [[{"id": 1, "seq": 4, "op": "U", "name": "late"}, {"id": 3, "seq": 6, "op": "U", "name": "c"}]],
    ]
    crashy = scd2_table(tmp_path / "crashy")
    oracle = HistoryOracle(key=("id",), seq="seq", columns=("name", "note"), track=("name",))
    for n, files in enumerate(batches):
        folder = write_batch(tmp_path / f"b{n}", files)
        oracle.apply(files)
        if n == 1:
            real = scd2.write

            def crash(*args: Any, **kwargs: Any) -> None:
                raise RuntimeError("killed")

            monkeypatch.setattr(scd2, "write", crash)
            with pytest.raises(RuntimeError, match="killed"):
                lakemerge.apply_table(crashy, inputs=[str(folder)], spark=spark)
            assert deltalake.DeltaTable(crashy.path).version() == 0, "nothing committed"
            assert len(deltalake.DeltaTable(crashy.tombstone_table).to_pyarrow_table()) == 2, "orphans written"
            monkeypatch.setattr(scd2, "write", real)
        lakemerge.apply_table(crashy, inputs=[str(folder)], spark=spark)
        assert history_rows(crashy.path) == oracle_rows(oracle), f"batch {n}"
    assert history_rows(crashy.path)[0] == {
        "id": 1,
        "seq": 1,
        "name": "a",
        "note": None,
        "__start_at": 1,
        "__end_at": 4,
        "__current": False,
    }


def test_the_manual_s_history_example_validates(tmp_path: Path) -> None:
    import re

    guide = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "history.md").read_text()
    example = next(b for b in re.findall(r'```toml(?: title="[^"]+")?\n(.*?)```', guide, flags=re.S) if "scd2" in b)
    (tmp_path / "p.toml").write_text(example)
    table = lakemerge.load_pipeline(tmp_path / "p.toml").table("customers")
    assert table.scd2 and table.feeds[0].snapshot and not table.feeds[1].snapshot
    assert table.track_columns == ("name", "segment")
