"""A ``[sources.NAME]`` section: a whole database's Debezium topics, a table per topic. Its paths are
the pipeline file's, its templates and settings are checked as the file is read, and its tables'
names, paths, keys and settings follow from their topics. No Spark needed."""

from __future__ import annotations

from pathlib import Path

import pytest

import lakemerge
from lakemerge.config.source import SourceConfig

SOURCE = """
[sources.shop]
bootstrap_servers = "127.0.0.1:9092"
topic_pattern = "shop[.].*"
table_path = "lake/{schema}/{table}"
checkpoint = "checkpoints/shop"
exclude = ["public[.]audit_.*"]
max_records_per_batch = 500

[sources.shop.defaults]
write_mode = "deletion_vectors"
sequence = "__source_lsn"
max_bad_rows = 3
"""


def load(tmp_path: Path, text: str) -> lakemerge.PipelineConfig:
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    return lakemerge.load_pipeline(path)


def failure(tmp_path: Path, text: str) -> lakemerge.ConfigError:
    with pytest.raises(lakemerge.ConfigError) as raised:
        load(tmp_path, text)
    assert "\n" not in str(raised.value), "one line"
    return raised.value


def test_a_source_section_reads_its_paths_relative_to_the_file_and_debezium_by_default(tmp_path: Path) -> None:
    config = load(tmp_path, SOURCE)
    source = config.sources["shop"]
    assert config.tables == {}, "a pipeline of one source and no table of its own"
    assert source.table_path == str(tmp_path / "lake" / "{schema}" / "{table}")
    assert source.checkpoint == str(tmp_path / "checkpoints" / "shop")
    assert source.state == str(tmp_path / "lake" / "_sources" / "shop"), "beside the tables by default"
    assert (source.format, source.op_column, source.delete_codes) == ("debezium", "__op", ("d",))
    assert source.max_records_per_batch == 500 and source.trigger == "available_now"


def test_each_topic_is_a_table_named_by_its_topic_with_the_defaults_under_its_own_settings(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        SOURCE + '\n[tables.orders]\nsource = "shop"\nhistory = "scd2"\nwrite_mode = "copy_on_write"\n'
        '\n[tables.legacy]\nsource = "shop"\npath = "old/legacy"\nkey = ["code"]\nsequence = []\n',
    )
    source = config.sources["shop"]
    assert config.tables == {}, "a source's tables are the source's, not tables streamed on their own"
    assert [
        t for t in ("shop.public.orders", "shop.public.audit_log", "shop.transaction", "shop") if source.includes(t)
    ] == ["shop.public.orders"], "excluded tables and Debezium's other topics are no tables"
    orders = source.table("shop.public.orders", ("id",))
    assert (orders.name, orders.path, orders.key) == ("orders", str(tmp_path / "lake/public/orders"), ("id",))
    assert (orders.history, orders.write_mode, orders.max_bad_rows, orders.sequence) == (
        "scd2",
        "copy_on_write",
        3,
        ("__source_lsn",),
    )
    customers = source.table("shop.public.customers", ("id", "region"))
    assert (customers.key, customers.write_mode) == (("id", "region"), "deletion_vectors")
    legacy = source.table("shop.public.legacy", ("id",))
    assert (legacy.path, legacy.key, legacy.sequence) == (str(tmp_path / "old/legacy"), ("code",), ())
    assert source.keyed("legacy") and not source.keyed("orders")
    named = load(tmp_path, SOURCE.replace('checkpoint = "', 'table_name = "{schema}_{table}"\ncheckpoint = "'))
    assert named.sources["shop"].name_of("shop.sales-eu.orders") == "sales_eu_orders"


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        (('table_path = "lake/{schema}/{table}"', 'table_path = "lake/{db}/{table}"'), "sources.shop.table_path",
         "has the placeholder {db}; a template knows {topic}, {prefix}, {schema}, {table}"),
        (('table_path = "lake/{schema}/{table}"', 'table_path = "lake/{schema}"'), "sources.shop.table_path",
         "names no {table} (or {topic}): every table would get one path"),
        (('table_path = "lake/{schema}/{table}"', 'table_path = "lake/{table:>9}"'), "sources.shop.table_path",
         "{table} takes no format or conversion"),
        (('table_path = "lake/{schema}/{table}"', 'table_path = "lake/{table"'), "sources.shop.table_path",
         "(write placeholders as {schema}, {table})"),
        (('checkpoint = "', 'table_name = "{schema}"\ncheckpoint = "'), "sources.shop.table_name",
         "names no {table} (or {topic}): every table would get one name"),
        (('exclude = ["public[.]audit_.*"]', 'exclude = ["(audit"]'), "sources.shop.exclude",
         "'(audit' is not a regular expression"),
        (('write_mode = "deletion_vectors"', 'write_mode = "log"\nhistory = "scd2"'), "sources.shop.defaults",
         "write_mode = 'log' cannot be combined with history = 'scd2'"),
        (('max_bad_rows = 3', 'key = ["id"]'), "sources.shop.defaults",
         "['key'] are each table's own, not defaults of a source's tables"),
        (('max_bad_rows = 3', 'colour = "red"'), "sources.shop.defaults", "colour: unknown key"),
        (('checkpoint = "', 'format = "json"\ncheckpoint = "'), "sources.shop.format", "'debezium'"),
        (('checkpoint = "', 'source = "files"\ncheckpoint = "'), "sources.shop.source", "'kafka'"),
        (('checkpoint = "', 'message_key = "json"\ncheckpoint = "'), "sources.shop.message_key",
         "not a key of a source: a source reads each table's key from the message keys' schemas"),
        (('topic_pattern = "shop[.].*"', 'topics = ["a.b.c"]\ntopic_pattern = "shop[.].*"'), "sources.shop",
         "a kafka stream needs topics or topic_pattern (one of them)"),
        (('checkpoint = "checkpoints/shop"\n', ''), "sources.shop.checkpoint", "required key is missing"),
    ],
)  # fmt: skip
def test_a_wrong_source_setting_is_one_line_naming_its_key(
    tmp_path: Path, change: tuple[str, str], key: str, message: str
) -> None:
    error = failure(tmp_path, SOURCE.replace(*change))
    assert error.key == key and message in str(error), str(error)


@pytest.mark.parametrize(
    ("field", "line"),
    [
        ("schema_ddl", 'schema = "id INT"'),
        ("types", 'types = { id = "int" }'),
        ("message_key", 'message_key = "ignore"'),
    ],
)
def test_each_key_a_source_refuses_is_one_line_naming_it(tmp_path: Path, field: str, line: str) -> None:
    """Even with a harmless value: the source's tables take these from their events."""
    assert set(SourceConfig.REFUSED) == {"schema_ddl", "types", "message_key"}
    error = failure(tmp_path, SOURCE.replace('checkpoint = "', line + '\ncheckpoint = "'))
    key = line.split(" =")[0]
    assert error.key == f"sources.shop.{key}", str(error)
    assert f"not a key of a source: {SourceConfig.REFUSED[field]}" in str(error)
    assert load(tmp_path, SOURCE.replace('checkpoint = "', 'format = "debezium"\ncheckpoint = "')).sources


def test_a_sources_table_settings_are_checked_with_the_defaults(tmp_path: Path) -> None:
    conflicting = failure(
        tmp_path, SOURCE.replace("deletion_vectors", "log") + '[tables.orders]\nsource = "shop"\nhistory = "scd2"\n'
    )
    assert conflicting.key == "sources.shop" and "table 'orders' of the source ([tables.orders]): " in str(conflicting)
    assert "cannot be combined with history = 'scd2'" in str(conflicting)
    fed = failure(tmp_path, SOURCE + '[tables.orders]\nsource = "shop"\n[tables.orders.stream]\ncheckpoint = "c"\n')
    assert "['stream'] are not for a source's table (the source feeds it)" in str(fed)
    unknown = failure(tmp_path, SOURCE + '[tables.orders]\nsource = "warehouse"\n')
    assert "table 'orders' names source 'warehouse', which the pipeline does not define" in str(unknown)
    clash = failure(
        tmp_path, SOURCE + '[groups.shop]\ntables = ["t"]\nstate = "s"\n[tables.t]\npath = "t"\nkey = "id"\n'
    )
    assert "'shop' is both a group and a source" in str(clash)
    empty = failure(tmp_path, '[spark]\nmaster = "local[1]"\n')
    assert "add a [tables.NAME] or a [sources.NAME] section" in str(empty)
