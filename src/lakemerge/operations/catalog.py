"""Register tables, and the views that go with them, by name in the Spark catalog.

With ``[spark] catalog = "hive"`` the catalog is a Hive metastore, so ``spark-sql``, the Spark
Thrift server (JDBC, beeline) and other metastore clients find the tables as ``database.table``.
The catalog only points at the table's location: the Delta log stays the truth, and a registered
table always shows its latest commit.

Views come from hooks, one per kind of table: SCD type 2 tables get ``<name>_current``, their
current rows; ``log`` tables get ``<name>_merged``, the table with its change log applied (the
table's own name shows it as of the last compaction).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from lakemerge.columns import quoted, sql_string
from lakemerge.config.table import CURRENT, TableConfig
from lakemerge.errors import ConfigError, TableError
from lakemerge.results import Registered
from lakemerge.storage.filesystems import filesystem
from lakemerge.table.store import table_exists

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A view hook: for a table registered under ``name``, the views to create as (view name, SELECT).
ViewHook = Callable[["SparkSession", TableConfig, str], Sequence[tuple[str, str]]]


def _current_rows(spark: SparkSession, table: TableConfig, name: str) -> Sequence[tuple[str, str]]:
    if not table.scd2:
        return ()
    return ((f"{name}_current", f"SELECT * FROM {_quoted(name)} WHERE {quoted(CURRENT)}"),)


def _merged(spark: SparkSession, table: TableConfig, name: str) -> Sequence[tuple[str, str]]:
    """Log tables: ``<name>_merged``, the table with its change log applied (docs/modes.md). Its
    columns are fixed when it is created; each batch recreates it, following new columns."""
    from lakemerge.table.logview import merged_view_sql

    if not table.log_mode:
        return ()
    sql = merged_view_sql(spark, table)
    return ((f"{name}_merged", sql),) if sql is not None else ()


_HOOKS: list[ViewHook] = [_current_rows, _merged]


def views_of(spark: SparkSession, table: TableConfig, name: str) -> list[tuple[str, str]]:
    """The views every hook asks for beside ``table`` registered as ``name``."""
    return [view for hook in _HOOKS for view in hook(spark, table, name)]


def catalog_name(table: TableConfig) -> str:
    """The name ``table`` is registered under: its ``catalog_name``, else ``default.<name>``."""
    name = table.catalog_name or table.name
    return name if "." in name else f"default.{name}"


def register(spark: SparkSession, table: TableConfig) -> Registered:
    """Create (if missing) the catalog entry of ``table`` and its views.

    Raises:
        TableError: no Delta table exists yet at the table's path (apply a batch first).
        ConfigError: the name is taken by another table or location.
    """
    from pyspark.errors import AnalysisException

    name = catalog_name(table)
    has_table = table_exists(spark, table.path)
    if not has_table and not (table.log_mode and table_exists(spark, table.log_table)):
        raise TableError(f"{table.path}: no Delta table to register as {name} yet (apply a batch first)")
    database = name.split(".", 1)[0]
    location = _qualified(spark, table.path)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {quoted(database)}")
    created = False
    if not has_table:
        pass  # a log table before its first compaction: only its merged view can be registered
    elif spark.catalog.tableExists(name):
        held = _location_of(spark, name)
        if held is None or held.rstrip("/") != location.rstrip("/"):
            raise ConfigError(
                f"catalog name {name} is taken by {held or 'a table that is not a Delta table'}, "
                f"not {location}: choose another catalog_name, or drop the old entry",
                key=f"tables.{table.name}.catalog_name",
            )
    else:
        try:
            spark.sql(f"CREATE TABLE {_quoted(name)} USING DELTA LOCATION {sql_string(location)}")
            created = True
        except AnalysisException as exc:
            if "already exists" not in str(exc).lower():  # a concurrent writer registered it first
                raise
    views = []
    for view, select in views_of(spark, table, name):
        spark.sql(f"CREATE OR REPLACE VIEW {_quoted(view)} AS {select}")
        views.append(view)
    return Registered(table=table.name, name=name, location=location, created=created, views=tuple(views))


def register_tables(spark: SparkSession, tables: Sequence[TableConfig]) -> list[Registered]:
    """Register each table that exists (or has a change log); a table not yet created is skipped."""
    return [
        register(spark, t)
        for t in tables
        if table_exists(spark, t.path) or (t.log_mode and table_exists(spark, t.log_table))
    ]


def _location_of(spark: SparkSession, name: str) -> str | None:
    from pyspark.errors import AnalysisException

    try:
        row = spark.sql(f"DESCRIBE DETAIL {_quoted(name)}").select("format", "location").collect()[0]
    except AnalysisException:
        return None
    return str(row["location"]) if row["format"] == "delta" else None


def _qualified(spark: SparkSession, path: str) -> str:
    """``path`` as a fully qualified URI of its file system (``file:/...``, ``hdfs://nn/...``)."""
    return filesystem(spark, path).qualify(path)


def _quoted(name: str) -> str:
    """A catalog name (``table`` or ``database.table``) as SQL names it."""
    return ".".join(quoted(part) for part in name.split("."))
