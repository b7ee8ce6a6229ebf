"""Configuration: TOML pipeline files and chombo properties files, and their error messages.
No Spark needed."""

from __future__ import annotations

from pathlib import Path

import pytest

import lakemerge
from lakemerge.config.properties_file import parse_properties, table_from_properties

GOOD = """
[spark]
master = "local[2]"
conf = { "spark.sql.shuffle.partitions" = 4, "spark.sql.adaptive.enabled" = true }

[tables.products]
path = "lake/products"
key = ["product_id"]
sequence = "updated_at"
partition_by = ["category"]

[tables.products.feed]
location = "landing/products"
format = "csv"
header = true
op_column = "op"
delete_codes = ["D", "X"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    return path


def test_pipeline_file_parses_and_resolves_relative_paths(tmp_path: Path) -> None:
    pipeline = lakemerge.load_pipeline(write(tmp_path, GOOD))
    table = pipeline.table("products")
    assert table.name == "products"
    assert table.path == str(tmp_path / "lake" / "products")
    assert table.feed.location == (str(tmp_path / "landing" / "products"),)
    assert table.sequence == ("updated_at",)
    assert table.partition_by == ("category",)
    assert table.feed.delete_codes == ("D", "X")
    assert pipeline.spark.master == "local[2]" and pipeline.spark.landing == "auto"
    assert pipeline.spark.conf == {"spark.sql.shuffle.partitions": "4", "spark.sql.adaptive.enabled": "true"}


def test_uri_paths_are_kept(tmp_path: Path) -> None:
    text = GOOD.replace('"lake/products"', '"s3a://bucket/lake/products"')
    assert lakemerge.load_pipeline(write(tmp_path, text)).table("products").path == "s3a://bucket/lake/products"


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (('format = "csv"', 'format = "xls"'), "tables.products.feed.format", "'csv'"),
        (('key = ["product_id"]', "key = []"), "tables.products.key", "at least one key"),
        (('key = ["product_id"]', ""), "tables.products.key", "required key is missing"),
        (("header = true", "header = true\nheadr = 1"), "tables.products.feed.headr", "unknown key"),
        (('master = "local[2]"', 'mastr = "x"'), "spark.mastr", "unknown key"),
        (('op_column = "op"', 'op_column = "updated_at"'), "tables.products", "op_column"),
        (('delete_codes = ["D", "X"]', 'delete_codes = ["D"]\nupsert_codes = ["D"]'), "tables.products.feed", "both"),
        (('format = "csv"', 'format = "csv"\ndelimiter = ";;"'), "tables.products.feed.delimiter", "one character"),
        (('sequence = "updated_at"', 'sequence = ["product_id"]'), "tables.products", "both key and sequence"),
        (('master = "local[2]"', 'landing = "driver"'), "spark.landing", "'auto', 'client' or 'server'"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, edit: tuple[str, str], key: str, words: str) -> None:
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(lakemerge.ConfigError) as info:
        lakemerge.load_pipeline(path)
    message = str(info.value)
    assert str(path) in message
    assert f"key '{key}" in message
    assert words in message
    assert "\n" not in message


def test_missing_and_invalid_pipeline_files(tmp_path: Path) -> None:
    with pytest.raises(lakemerge.ConfigError, match="does not exist"):
        lakemerge.load_pipeline(tmp_path / "nope.toml")
    with pytest.raises(lakemerge.ConfigError, match="not valid TOML"):
        lakemerge.load_pipeline(write(tmp_path, "[tables\n"))
    with pytest.raises(lakemerge.ConfigError, match="no table"):
        lakemerge.load_pipeline(write(tmp_path, "[spark]\n"))


def test_unknown_table_name_lists_known_ones(tmp_path: Path) -> None:
    pipeline = lakemerge.load_pipeline(write(tmp_path, GOOD))
    with pytest.raises(lakemerge.ConfigError, match=r"no table named .orders.*products"):
        pipeline.table("orders")


# --- chombo properties ---------------------------------------------------------------------------

SEED = """
#op.code.field.ordinal=4
deleted.op.code=D
deleted.record.file.prefix=del
temporal.ordering.field.ordinal=5
temporal.ordering.field.numeric=true
id.field.ordinals=0
"""


def props_table(text: str, **kwargs: object) -> lakemerge.TableConfig:
    return table_from_properties(
        parse_properties(text), source="m.properties", table_path="/t", inputs=["/in"], **kwargs
    )  # type: ignore[arg-type]


def test_seed_properties_map_onto_a_table() -> None:
    table = props_table(SEED)
    assert table.key == ("c0",)
    assert table.sequence == ("c5",)
    assert table.feed.types == {"c5": "bigint"}
    assert table.feed.delete_file_prefix == "del"
    assert table.feed.op_column is None
    assert table.feed.format == "text"
    assert table.feed.delimiter_regex == ","


def test_rsbm_prefix_composite_key_names_and_op_column() -> None:
    text = (
        "rsbm.id.field.ordinals=0, 2\nrsbm.op.code.field.ordinal=3\nrsbm.deleted.op.code=X\n"
        "rsbm.field.delim.regex=\\\\|\nrsbm.temporal.ordering.field.ordinal=1\n"
        "rsbm.temporal.ordering.field.numeric=false\n"
    )
    table = props_table(text, columns=["id", "ts", "region", "op", "v"])
    assert table.key == ("id", "region")
    assert table.sequence == ("ts",)
    assert table.feed.types == {}
    assert table.feed.op_column == "op"
    assert table.feed.delete_codes == ("X",)
    assert table.feed.delimiter_regex == "\\|"


def test_no_ordering_field_orders_by_file_name_number() -> None:
    table = props_table("id.field.ordinals=0\ndeleted.record.file.prefix=del\n")
    assert table.sequence == ()
    assert table.sequence_columns == ("_lm_sequence",)
    assert table.feed.file_order == "name_number"


def test_properties_parser_handles_comments_separators_and_continuations() -> None:
    parsed = parse_properties("! comment\n# another\na = 1\nb: two\nc=x\\\n  y\n\nd\n")
    assert parsed == {"a": "1", "b": "two", "c": "xy", "d": ""}


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("deleted.record.file.prefix=del\n", "id.field.ordinals", "required"),
        ("id.field.ordinals=0\n", "op.code.field.ordinal", "either op.code.field.ordinal or deleted.record"),
        ("id.field.ordinals=zero\ndeleted.record.file.prefix=del\n", "id.field.ordinals", "field ordinal"),
        ("id.field.ordinals=-1\ndeleted.record.file.prefix=del\n", "id.field.ordinals", "0 or more"),
        ("id.field.ordinals=0\nop.code.field.ordinal=0\n", "tables", "op_column"),
        (
            "id.field.ordinals=0\ndeleted.record.file.prefix=del\ntemporal.ordering.field.ordinal=1\n"
            "temporal.ordering.field.numeric=yes\n",
            "temporal.ordering.field.numeric",
            "true or false",
        ),
    ],
)
def test_properties_errors_name_the_key(text: str, key: str, words: str) -> None:
    with pytest.raises(lakemerge.ConfigError) as info:
        props_table(text)
    message = str(info.value)
    assert "m.properties" in message
    assert words in message
    if key != "tables":
        assert f"key '{key}'" in message


def test_named_columns_reject_ordinals_beyond_them() -> None:
    with pytest.raises(lakemerge.ConfigError, match="ordinal 7 is beyond the 2 named columns"):
        props_table("id.field.ordinals=7\ndeleted.record.file.prefix=del\n", columns=["a", "b"])


def test_missing_properties_file(tmp_path: Path) -> None:
    with pytest.raises(lakemerge.ConfigError, match="does not exist"):
        lakemerge.load_properties(tmp_path / "x.properties", table_path="/t", inputs=["/in"])


CDC = """
[tables.accounts]
path = "lake/accounts"
key = "id"
sequence = "__source_lsn"

[tables.accounts.feed]
location = "landing/accounts"
format = "debezium"
container = "avro"
ignore_codes = ["skip"]
types = { balance = "decimal(10,2)" }

[tables.accounts.feed.debezium]
decimal_handling_mode = "precise"
time_precision_mode = "adaptive_time_microseconds"
binary_handling_mode = "hex"
fractional_digits = { updated_at = 3 }

[tables.orders]
path = "lake/orders"
key = "id"
sequence = "updated_at"

[tables.orders.feed]
location = "landing/orders"
envelope = "dms"
schema = "id INT, updated_at TIMESTAMP"

[tables.orders.feed.dms]
include_op_for_full_load = true
cdc_inserts_only = true
timestamp_column_name = "dms_ts"
"""


def test_change_feed_settings(tmp_path: Path) -> None:
    pipeline = lakemerge.load_pipeline(write(tmp_path, CDC))
    feed = pipeline.table("accounts").feed
    assert (feed.container, feed.debezium.time_precision_mode, feed.debezium.fractional_digits) == (
        "avro",
        "adaptive_time_microseconds",
        {"updated_at": 3},
    )
    # The events that change no row are always ignored, beside the codes the feed lists.
    assert {"skip", "tombstone", "heartbeat", "schema_change", "transaction", "m"} <= set(feed.ignore_codes)
    dms = pipeline.table("orders")
    assert (dms.feed.dms.load_op, dms.feed.dms.changes_op) == (True, True)
    assert dms.sequence_columns == ("_lm_phase", "updated_at")
    assert dms.feed.dms.model_copy(update={"include_op_for_full_load": False}).changes_op is False


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (('container = "avro"', 'container = "orc"'), "tables.accounts.feed.container", "'json', 'avro' or 'parquet'"),
        (('"adaptive_time_microseconds"', '"micro"'), "tables.accounts.feed.debezium.time_precision_mode", "'connect'"),
        (('"precise"', '"exact"'), "tables.accounts.feed.debezium.decimal_handling_mode", "'double'"),
        (("updated_at = 3", "updated_at = 12"), "tables.accounts.feed.debezium.fractional_digits", "0 to 9"),
        (('binary_handling_mode = "hex"', "binary = 1"), "tables.accounts.feed.debezium.binary", "unknown key"),
        (("cdc_inserts_only = true", "cdc_inserts_only = true\ncdc_inserts_and_updates = true"),
         "tables.orders.feed.dms", "not both"),
        (("cdc_inserts_only = true", "preserve_transactions = true"), "tables.orders.feed.dms", "CDC_TXN"),
        (('envelope = "dms"', 'envelope = "dms"\ncontainer = "avro"'), "tables.orders.feed", 'format = "debezium"'),
        (('sequence = "updated_at"', 'sequence = "updated_at"\nhistory = "scd2"'), "tables.orders", "sequence = []"),
    ],
)  # fmt: skip
def test_change_feed_settings_errors_name_the_key(tmp_path: Path, edit: tuple[str, str], key: str, words: str) -> None:
    path = write(tmp_path, CDC.replace(*edit))
    with pytest.raises(lakemerge.ConfigError) as info:
        lakemerge.load_pipeline(path)
    message = str(info.value)
    assert f"key '{key}'" in message and words in message, message


def test_the_manual_s_change_feed_examples_validate(tmp_path: Path) -> None:
    import re

    guide = (Path(__file__).resolve().parents[2] / "docs" / "howto" / "debezium-dms.md").read_text()
    blocks = re.findall(r'```toml(?: title="[^"]+")?\n(.*?)```', guide, flags=re.S)
    debezium = next(b for b in blocks if "[tables.accounts.feed.debezium]" in b)
    dms = next(b for b in blocks if "[tables.customers.feed.dms]" in b)
    text = "\n".join(line.removeprefix("  ") for line in (debezium + dms).splitlines())
    pipeline = lakemerge.load_pipeline(write(tmp_path, text))
    assert pipeline.table("accounts").feed.debezium.fractional_digits == {"updated_at": 6}
    assert pipeline.table("customers").sequence_columns == ("_lm_phase", "dms_ts")


DECLARED = """
[tables.t]
path = "lake/t"
key = "id"
sequence = "seq"
{table}
[tables.t.feed]
location = "landing"
format = "csv"
header = true
schema = "id INT, seq BIGINT, op STRING, `first name` STRING, town STRING"
op_column = "op"
{feed}
"""


@pytest.mark.parametrize(
    ("table", "feed", "key", "column"),
    [
        ('history = "scd2"\ntrack_columns = ["city"]', "", "tables.t.track_columns", "city"),
        ('ignore_null_updates = ["first_name"]', "", "tables.t.ignore_null_updates", "first_name"),
        ('partition_by = ["region"]', "", "tables.t.partition_by", "region"),
        ('key = "ID"', "", "tables.t.key", "ID"),
        ("", 'types = { price = "int" }', "tables.t.feed.types", "price"),
        ("", 'keep_columns = ["id", "seq", "zip"]', "tables.t.feed.keep_columns", "zip"),
        ("", 'drop_columns = ["zip"]', "tables.t.feed.drop_columns", "zip"),
        (
            "",
            'snapshot = true\nsnapshot_order = "column"\nsnapshot_column = "at"',
            "tables.t.feed.snapshot_column",
            "at",
        ),
    ],
)
def test_column_references_are_checked_against_the_declared_schema(
    tmp_path: Path, table: str, feed: str, key: str, column: str
) -> None:
    text = DECLARED.format(table=table, feed=feed)
    if 'key = "ID"' in text:
        text = text.replace('key = "id"\n', "")
    with pytest.raises(lakemerge.ConfigError) as info:
        lakemerge.load_pipeline(write(tmp_path, text))
    assert info.value.key == key and f"column '{column}'" in str(info.value) and "first name" in str(info.value)


def test_names_in_backticks_are_declared_columns(tmp_path: Path) -> None:
    text = DECLARED.format(table='history = "scd2"\ntrack_columns = ["first name"]', feed="")
    assert lakemerge.load_pipeline(write(tmp_path, text)).table("t").track_columns == ("first name",)
    from lakemerge.config.feed import ddl_names

    ddl = "a INT, `b c` STRING, `d``e` DECIMAL(10, 2), m MAP<STRING, INT>, s STRUCT<x: INT, y: STRING> COMMENT 'p, q'"
    assert ddl_names(ddl) == ("a", "b c", "d`e", "m", "s")
