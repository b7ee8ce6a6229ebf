"""Bad input gets one clear line naming the file, row and reason, a non-zero exit code, and the
table is left exactly as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import lakemerge
from lakemerge.cli.app import app
from tests.helpers import read_table, table_version, write_lines

runner = CliRunner()
SCHEMA = "id INT, seq BIGINT, op STRING, v STRING"


def table_cfg(tmp_path: Path, location: Path, **feed: object) -> lakemerge.TableConfig:
    settings: dict[str, object] = {
        "location": (str(location),),
        "format": "csv",
        "header": True,
        "schema": SCHEMA,
        "op_column": "op",
        "upsert_codes": ("I", "U"),
    }
    settings.update(feed)
    return lakemerge.TableConfig(
        name="t",
        path=str(tmp_path / "table"),
        key=("id",),
        sequence=("seq",),
        feed=lakemerge.FeedConfig(**settings),  # type: ignore[arg-type]
    )


@pytest.fixture()
def seeded(spark: object, tmp_path: Path) -> lakemerge.TableConfig:
    """A table at version 0 holding ids 1 and 2."""
    write_lines(tmp_path / "b0" / "f.csv", ["id,seq,op,v", "1,1,I,a", "2,1,I,b"])
    cfg = table_cfg(tmp_path, tmp_path / "b0")
    assert lakemerge.apply_table(cfg, spark=spark).version == 0
    return cfg


def assert_unchanged(cfg: lakemerge.TableConfig) -> None:
    assert table_version(cfg.path) == 0
    assert read_table(cfg.path, ["id", "v"]) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


def apply_bad(
    spark: object, cfg: lakemerge.TableConfig, tmp_path: Path, lines: list[str], name: str = "bad.csv"
) -> lakemerge.LakemergeError:
    path = write_lines(tmp_path / "b1" / name, lines)
    with pytest.raises(lakemerge.LakemergeError) as info:
        lakemerge.apply_table(cfg, inputs=[str(path.parent)], spark=spark)
    assert "\n" not in str(info.value)
    assert_unchanged(cfg)
    return info.value


@pytest.mark.parametrize(
    ("lines", "row", "reason"),
    [
        (["id,seq,op,v", "3,2,U,c", "4,2,U,d,extra"], 3, "malformed record"),
        (["id,seq,op,v", "3,2,U"], 2, "malformed record"),
        (["id,seq,op,v", "3,2,U,c", "4,2,U,d", ",2,U,e"], 4, "null key column 'id'"),
        (["id,seq,op,v", "3,,U,c"], 2, "null sequence column 'seq'"),
        (["id,seq,op,v", "3,2,U,c", "4,2,Z,d"], 3, "unknown op code 'Z'"),
        (["id,seq,op,v", "3,2,,c"], 2, "null op code"),
        (["id,seq,op,v", "3,yesterday,U,c"], 2, "cannot convert column 'seq' value 'yesterday' to bigint"),
        (["id,seq,op,v", "x3,2,U,c"], 2, "cannot convert column 'id' value 'x3' to int"),
    ],
)
def test_bad_records_name_file_row_and_reason(
    spark: object, seeded: lakemerge.TableConfig, tmp_path: Path, lines: list[str], row: int, reason: str
) -> None:
    error = apply_bad(spark, seeded, tmp_path, lines)
    assert isinstance(error, lakemerge.InputError)
    assert error.row == row
    assert error.path is not None and error.path.endswith("b1/bad.csv")
    assert reason in str(error)
    assert "nothing was applied" in str(error)


def test_many_bad_rows_are_counted(spark: object, seeded: lakemerge.TableConfig, tmp_path: Path) -> None:
    error = apply_bad(spark, seeded, tmp_path, ["id,seq,op,v", "3,2,U,c", ",2,U,x", ",3,U,y", ",4,U,z"])
    assert "2 more bad rows" in str(error)


def test_bad_row_in_a_split_file_gets_its_true_line_number(spark: object, tmp_path: Path) -> None:
    """A file big enough to be split into several tasks still reports the right line."""
    lines = ["id,seq,op,v"] + [f"{i},1,I,{'x' * 40}" for i in range(3000)]
    lines[2500] = "oops,1,I,v"
    path = write_lines(tmp_path / "in" / "big.csv", lines)
    cfg = table_cfg(tmp_path, path.parent)
    spark.conf.set("spark.sql.files.maxPartitionBytes", "16384")  # type: ignore[attr-defined]
    try:
        with pytest.raises(lakemerge.InputError) as info:
            lakemerge.apply_table(cfg, spark=spark)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")  # type: ignore[attr-defined]
    assert info.value.row == 2501
    assert not Path(cfg.path).exists()


def test_missing_input_path(spark: object, seeded: lakemerge.TableConfig, tmp_path: Path) -> None:
    with pytest.raises(lakemerge.InputError, match="input path does not exist") as info:
        lakemerge.apply_table(seeded, inputs=[str(tmp_path / "nowhere")], spark=spark)
    assert str(tmp_path / "nowhere") in str(info.value)
    assert_unchanged(seeded)


def test_unreadable_file(spark: object, seeded: lakemerge.TableConfig, tmp_path: Path) -> None:
    cfg = seeded.model_copy(update={"feed": seeded.feed.model_copy(update={"format": "parquet"})})
    error = apply_bad(spark, cfg, tmp_path, ["this is not parquet"], name="broken.parquet")
    assert isinstance(error, lakemerge.InputError)
    assert "cannot read change files" in str(error)


def test_key_ordinal_beyond_the_row(spark: object, tmp_path: Path) -> None:
    props = tmp_path / "m.properties"
    props.write_text("id.field.ordinals=9\ndeleted.record.file.prefix=del\ntemporal.ordering.field.ordinal=2\n")
    write_lines(tmp_path / "in" / "x.csv", ["a,b,1"])
    cfg = lakemerge.load_properties(props, table_path=str(tmp_path / "t"), inputs=[str(tmp_path / "in")])
    with pytest.raises(lakemerge.InputError, match="refers to field ordinal 9, but records have 3 fields"):
        lakemerge.apply_table(cfg, spark=spark)
    assert not (tmp_path / "t").exists()


def test_incompatible_type_changes_nothing(spark: object, seeded: lakemerge.TableConfig, tmp_path: Path) -> None:
    cfg = seeded.model_copy(
        update={"feed": seeded.feed.model_copy(update={"schema_ddl": "id INT, seq BIGINT, op STRING, v INT"})}
    )
    error = apply_bad(spark, cfg, tmp_path, ["id,seq,op,v", "1,5,U,7"])
    assert isinstance(error, lakemerge.SchemaError)
    assert "column 'v' is INT in the feed but STRING in the table" in str(error)


def test_changed_file_is_never_reapplied_silently(spark: object, seeded: lakemerge.TableConfig, tmp_path: Path) -> None:
    write_lines(tmp_path / "b0" / "f.csv", ["id,seq,op,v", "1,1,I,a", "2,1,I,b", "3,1,I,c"])
    with pytest.raises(lakemerge.InputError, match="has changed since"):
        lakemerge.apply_table(seeded, spark=spark)
    assert_unchanged(seeded)


def test_rerun_applies_nothing(spark: object, seeded: lakemerge.TableConfig) -> None:
    result = lakemerge.apply_table(seeded, spark=spark)
    assert result.version is None and len(result.skipped_files) == 1
    assert_unchanged(seeded)


def test_table_path_that_is_not_a_delta_table(spark: object, tmp_path: Path) -> None:
    write_lines(tmp_path / "in" / "f.csv", ["id,seq,op,v", "1,1,I,a"])
    write_lines(tmp_path / "table" / "precious.txt", ["do not overwrite"])
    with pytest.raises(lakemerge.TableError, match="not a Delta table"):
        lakemerge.apply_table(table_cfg(tmp_path, tmp_path / "in"), spark=spark)
    assert (tmp_path / "table" / "precious.txt").read_text() == "do not overwrite\n"


# --- the CLI: one line on stderr, the documented exit code -----------------------------------------


def test_cli_exit_codes(spark: object, tmp_path: Path) -> None:
    bad_toml = tmp_path / "p.toml"
    bad_toml.write_text('[tables.t]\npath = "x"\nkey = "id"\n[tables.t.feed]\nlocation = "in"\nformat = "xls"\n')
    result = runner.invoke(app, ["apply", str(bad_toml)])
    assert result.exit_code == 2
    assert "tables.t.feed.format" in result.output

    good = tmp_path / "good.toml"
    good.write_text(
        '[tables.t]\npath = "lake/t"\nkey = "id"\nsequence = "seq"\n'
        '[tables.t.feed]\nlocation = "missing"\nformat = "csv"\nheader = true\n'
    )
    result = runner.invoke(app, ["apply", str(good)])
    assert result.exit_code == 3
    assert "input path does not exist" in result.output
    assert len(result.output.strip().splitlines()) == 1

    result = runner.invoke(app, ["apply", str(good), "--table", "nope"])
    assert result.exit_code == 2 and "no table named 'nope'" in result.output

    result = runner.invoke(app, ["apply", "--properties", str(tmp_path / "m.properties"), str(tmp_path)])
    assert result.exit_code == 2 and "--table DIR" in result.output

    result = runner.invoke(app, ["history", str(tmp_path / "not-a-table")])
    assert result.exit_code == 2 and "no Delta table here" in result.output


def test_cli_pipeline_apply_and_nothing_pending(spark: object, tmp_path: Path) -> None:
    write_lines(tmp_path / "landing" / "f.csv", ["id,seq,op,v", "1,1,I,a", "1,2,D,", "2,1,U,b"])
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        '[tables.t]\npath = "lake/t"\nkey = "id"\nsequence = "seq"\n'
        '[tables.t.feed]\nlocation = "landing"\nformat = "csv"\nheader = true\n'
        'schema = "id INT, seq BIGINT, op STRING, v STRING"\nop_column = "op"\n'
    )
    result = runner.invoke(app, ["apply", str(pipeline)])
    assert result.exit_code == 0, result.output
    assert "created version 0" in result.output
    assert read_table(tmp_path / "lake" / "t") == [{"id": 2, "seq": 1, "v": "b"}]
    result = runner.invoke(app, ["apply", str(pipeline), "--table", "t"])
    assert result.exit_code == 0 and "nothing to apply" in result.output
