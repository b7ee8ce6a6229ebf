"""A Delta table's storage: whether a table is at a path, its latest snapshot and properties, reads
of a fixed version, and the writes a batch commits (create, append, a record-only commit)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakemerge.columns import delta_path
from lakemerge.errors import TableError
from lakemerge.storage import paths
from lakemerge.storage.filesystem import Entry, StorageError
from lakemerge.storage.filesystems import filesystem
from lakemerge.table.snapshot import Snapshot
from lakemerge.table.snapshots import is_delta, latest_snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from lakemerge.config import TableConfig

#: Rows per file of what lakemerge appends beside a table (log rows, tombstones): files of about this
#: many rows, not one per shuffle partition.
ROWS_PER_FILE = 1_000_000


def files_for(rows: int) -> int:
    """How many files ``rows`` rows are written in (at least one): see :data:`ROWS_PER_FILE`."""
    return max(1, -(-rows // ROWS_PER_FILE))


def table_exists(spark: SparkSession, path: str) -> bool:
    """True when ``path`` holds a Delta table; an existing non-Delta directory is an error."""
    if is_delta(spark, path):
        return True
    fs = filesystem(spark, path)
    try:
        found = fs.listing(path)
    except StorageError as exc:
        raise TableError(f"{path}: cannot list the table's folder: {exc}") from None
    if not found:
        return False
    own = fs.qualify(path)
    if len(found) == 1 and found[0].path == own and not found[0].directory:
        raise TableError(f"{path}: table path is a file, not a Delta table directory")
    foreign = _foreign_file(own, found)
    if foreign:
        raise TableError(
            f"{path}: directory exists and is not a Delta table (it holds {foreign}); refusing to write into it"
        )
    return False


def _foreign_file(folder: str, entries: list[Entry]) -> str | None:
    """A file that no Delta writer would leave in a table directory, or None (the first in path
    order). Parquet data files (also under ``column=value`` folders) and hidden entries are what a
    concurrent or crashed table creation leaves, and Delta ignores them."""
    for entry in sorted(entries, key=lambda e: e.path):
        parts = (paths.relative(entry.path, folder) or entry.name).split("/")
        if any(paths.hidden(part) for part in parts):
            continue
        outer = next((i for i, part in enumerate(parts[:-1]) if "=" not in part), None)
        if outer is not None:
            return paths.child(folder, "/".join(parts[: outer + 1]))
        if entry.directory:
            if "=" not in entry.name:
                return entry.path
        elif not entry.name.endswith(".parquet"):
            return entry.path
    return None


#: The table property that turns deletion vectors on.
DELETION_VECTORS = "delta.enableDeletionVectors"


def table_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """The table's properties, from its latest snapshot's metadata."""
    return latest_snapshot(spark, path).properties()


def read_pinned(spark: SparkSession, path: str) -> DataFrame:
    """The table as of its latest version now, read by that version number.

    Spark refreshes every cached plan that reads a path's latest version when the path is written;
    a batch writes to paths its cached classification read (its tombstones, its log, its own
    commit), which would drop that classification and plan or compute it again. A read of a fixed
    version is a different relation, which those refreshes leave alone."""
    return read_version(spark, path, latest_snapshot(spark, path).version)


def read_version(spark: SparkSession, path: str, version: int) -> DataFrame:
    """The table at ``path`` as of ``version`` (see :func:`read_pinned`)."""
    return spark.read.format("delta").option("versionAsOf", version).load(path)


def marks_rows(snapshot: Snapshot | None) -> bool:
    """Whether the table of ``snapshot`` (``None``: no table) has deletion vectors turned on: its
    readers expose each row's index in its file (``_metadata.row_index``)."""
    return snapshot is not None and snapshot.properties().get(DELETION_VECTORS, "false").lower() == "true"


#: Characters Delta refuses in a column name unless the table maps names to physical ones.
_UNMAPPABLE = frozenset(" ,;{}()\n\t=")

#: The table property of column mapping, and its mode that lets names hold any character.
COLUMN_MAPPING = "delta.columnMapping.mode"


def needs_mapping(schema: StructType) -> bool:
    """Whether a column (or nested field) name of ``schema`` holds a character Delta refuses in
    names without column mapping (a space, ``,;{}()=``, a tab or newline): such a table is
    created, or altered, with ``delta.columnMapping.mode = name``."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    def walk(kind: Any) -> bool:
        if isinstance(kind, StructType):
            return any(_UNMAPPABLE & set(f.name) or walk(f.dataType) for f in kind.fields)
        if isinstance(kind, ArrayType):
            return walk(kind.elementType)
        if isinstance(kind, MapType):
            return walk(kind.keyType) or walk(kind.valueType)
        return False

    return walk(schema)


def mapping_options(schema: StructType) -> dict[str, str]:
    """The table properties a new Delta table of ``schema`` needs (column mapping, where names
    need it: :func:`needs_mapping`); pass them as the writer's options."""
    return {COLUMN_MAPPING: "name"} if needs_mapping(schema) else {}


def map_names(spark: SparkSession, path: str, schema: StructType) -> None:
    """Turn on column mapping on the existing table at ``path`` before a write adds the columns of
    ``schema`` whose names need it (a metadata commit of its own, which changes no data); nothing
    when it has it already or the names do not need it."""
    if not needs_mapping(schema) or table_properties(spark, path).get(COLUMN_MAPPING, "none") != "none":
        return
    spark.sql(f"ALTER TABLE {sql_path(path)} SET TBLPROPERTIES ('{COLUMN_MAPPING}' = 'name')")


def create_table(frame: DataFrame, table: TableConfig) -> None:
    """Write ``frame`` as the table's first commit (partitioned, with deletion vectors enabled for
    ``deletion_vectors`` tables, and column mapping where names need it). Call inside
    :func:`commit_record`."""
    writer = frame.write.format("delta").mode("append").options(**mapping_options(frame.schema))
    if table.write_mode == "deletion_vectors":
        writer = writer.option(DELETION_VECTORS, "true")
    if table.partition_by:
        writer = writer.partitionBy(*table.partition_by)
    writer.save(table.path)


def append_rows(frame: DataFrame, table: TableConfig) -> None:
    """Append ``frame`` to the existing table, adding its new columns (Delta fills the table's
    columns it lacks with nulls). Call inside :func:`commit_record`."""
    frame.write.format("delta").mode("append").option("mergeSchema", "true").save(table.path)


def record_only(spark: SparkSession, path: str, txn_version: int) -> None:
    """A metadata-only commit recording a batch that writes no row (Delta would make no commit for
    an empty MERGE). It sets ``lakemerge.batch`` to the batch number, so that two such commits
    racing conflict in Delta. Call inside :func:`commit_record`."""
    spark.sql(f"ALTER TABLE {sql_path(path)} SET TBLPROPERTIES ('lakemerge.batch' = '{txn_version}')")


def merge_into(
    spark: SparkSession, path: str, source: DataFrame, *, on: str, clauses: Sequence[str], evolve: bool = True
) -> None:
    """One Delta MERGE of ``source`` (aliased ``s``) into the table at ``path`` (aliased ``t``) on the
    SQL condition ``on``, with its ``WHEN ...`` ``clauses`` in order; new source columns the clauses
    assign are added to the table unless ``evolve`` is false. The same statement in a classic and a
    Spark Connect session. Call inside :func:`lakemerge.table.ledger.commit_record`."""
    evolution = "WITH SCHEMA EVOLUTION " if evolve else ""
    # The source is a temporary view of its own, dropped once the statement ran: a MERGE runs when
    # it is stated, in a Spark Connect session too. (A DataFrame argument of the statement would be
    # copied by the Connect client into a message of its own, which its protobuf runtime refuses
    # past about fifty nested steps: a stream's batch plan reaches that.)
    view = f"_lm_source_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        spark.sql(f"MERGE {evolution}INTO {sql_path(path)} AS t USING {view} AS s ON {on} " + " ".join(clauses))
    finally:
        spark.catalog.dropTempView(view)


def when_updated(condition: str, values: dict[str, str]) -> str:
    """A MERGE clause: a matched row meeting the SQL ``condition`` (or any: ``TRUE``) takes
    ``values`` (quoted column → SQL expression)."""
    matched = "WHEN MATCHED" if condition == "TRUE" else f"WHEN MATCHED AND {condition}"
    return f"{matched} THEN UPDATE SET " + ", ".join(f"{name} = {value}" for name, value in values.items())


def when_inserted(condition: str, values: dict[str, str]) -> str:
    """A MERGE clause: a source row with no match meeting the SQL ``condition`` is inserted as
    ``values`` (quoted column → SQL expression)."""
    return f"WHEN NOT MATCHED AND {condition} THEN INSERT ({', '.join(values)}) VALUES ({', '.join(values.values())})"


def sql_path(path: str) -> str:
    """The Delta table at ``path`` as SQL names it: ``delta.`path```, a backtick in the path doubled."""
    return delta_path(path)
