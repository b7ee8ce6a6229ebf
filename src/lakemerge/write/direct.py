"""Write a copy-on-write or deletion-vector batch without Delta's MERGE, from what its
classification found (:mod:`lakemerge.table.direct` holds the transaction).

Each change that updates or deletes a stored row carries that row's data file (and, for a table
with deletion vectors, its row index), so the batch knows the files it touches:

- **copy-on-write**: the touched files are read once and written back without the rows the batch
  updates or deletes, the updates' new rows and the inserts beside them; the touched files are
  removed. No pass over the rest of the table. When the changes hold every column of the table and
  their keys can be broadcast, each stored row looks its key up in a broadcast of the changed keys
  alone: the touched files are never shuffled, each written back as it is read, and the new rows
  of a batch small enough to broadcast go to one more file. Those of a bigger batch are written by
  a job of their own, submitted after the rewrite's, whose tasks Spark runs once every touched file's
  task has started: the files' tasks are as uneven as the files, and the new rows' tasks fill the
  cores the last of them leave idle. Otherwise (a
  batch lacking some of the table's columns, whose updates keep the stored values of those, or one
  with too many keys) each stored row is joined with its key's whole change (broadcast when the
  batch is small).
- **deletion vectors**: the updates' new rows and the inserts are written as new files, and each
  touched file gets a deletion vector marking its replaced and deleted rows, from their row indexes:
  no read of the table at all.

The rows the write finds are counted as it runs (a Spark observation) and must be what the batch
counted: a stored row missing, or one more, fails the batch before its commit. The result is the
table a MERGE with the same changes gives (docs/semantics.md §1); batches it does not serve run
the MERGE (:func:`serves`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col
from lakemerge.config.table import TableConfig
from lakemerge.table import direct, transaction
from lakemerge.table.ledger import TXN_APP_ID
from lakemerge.table.snapshot import Snapshot
from lakemerge.table.store import marks_rows
from lakemerge.write.classify import Outcome

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Table properties under which a MERGE writes more than rows (change data files, row ids).
_MERGE_ONLY = ("delta.enableChangeDataFeed", "delta.enableRowTracking")

#: Column metadata Delta fills in itself on insert (generated and identity columns).
_FILLED = ("delta.generationExpression", "delta.identity.start")


@dataclass(frozen=True)
class Known:
    """What a batch's classification knows for its write.

    Attributes:
        snapshot: the table's version the changes were classified against.
        touched: the data files holding the stored rows the batch updates or deletes.
        inserted / updated / deleted: the batch's counts of each outcome.
        broadcast: the changes are few enough to broadcast to the touched files' rows.
        keyed: the keys of the changes are few enough to broadcast.
    """

    snapshot: Snapshot
    touched: tuple[str, ...]
    inserted: int
    updated: int
    deleted: int
    broadcast: bool = False
    keyed: bool = False


def serves(
    spark: SparkSession, known: Known, changes: StructType, data_columns: Sequence[str], *, row_index: bool
) -> bool:
    """Whether the batch can be written without MERGE: Delta's classes are there, its changes touch
    stored files, need no schema change (no new column, no wider type) and no stored value (a
    deletion-vector batch: the changes hold every column), and the table writes nothing a MERGE
    would add beside its rows. ``changes``: the classified changes' schema; ``row_index``: they
    carry their stored rows' row indexes (deletion vectors are written)."""
    if not known.touched or not direct.supported(spark):
        return False
    snapshot = known.snapshot
    properties = snapshot.properties()
    if any(properties.get(p, "false").lower() == "true" for p in _MERGE_ONLY):
        return False
    schema = snapshot.schema()
    if any(key in f.metadata for f in schema.fields for key in _FILLED):
        return False
    types = {f.name: f.dataType for f in schema.fields}
    given = {f.name: f.dataType for f in changes.fields}
    if any(c not in types or (c in given and given[c] != types[c]) for c in data_columns):
        return False  # (new columns, or wider types: the MERGE evolves the schema)
    return not (marks_rows(snapshot) and row_index) or set(types) <= set(data_columns)


def write_direct(
    spark: SparkSession,
    table: TableConfig,
    classified: DataFrame,
    *,
    known: Known,
    data_columns: Sequence[str],
    txn_version: int,
    record: str,
    before_commit: Callable[[], None] = lambda: None,
) -> int | None:
    """Write and commit the batch's changes (see the module) with ``record`` as the commit's
    userMetadata, calling ``before_commit`` between the write and the commit (what it raises stops
    the commit); the version committed, ``None`` when a concurrent writer committed this batch
    number first (nothing is written).

    Raises:
        AccountingError: the write found other stored rows than the batch counted (nothing is committed).
    """
    opened = direct.open_on(spark, known.snapshot, known.touched, app_id=TXN_APP_ID, txn_version=txn_version)
    if opened is None:
        return None
    schema = known.snapshot.schema()
    if marks_rows(known.snapshot) and C.STORED_ROW in classified.columns:
        figures = _with_vectors(opened, classified, schema, known)
    else:
        figures = _rewritten(opened, classified, schema, known, table.key, data_columns)
    before_commit()
    return opened.commit(app_id=TXN_APP_ID, txn_version=txn_version, metrics=figures, record=record)


def _rewritten(
    opened: direct.Direct,
    classified: DataFrame,
    schema: StructType,
    known: Known,
    key: Sequence[str],
    data_columns: Sequence[str],
) -> dict[str, int]:
    """Copy-on-write: the touched files' rows with their keys' changes applied, and the inserts."""
    from pyspark.sql import functions as F

    outcome = F.col(C.OUTCOME)
    # The changes hold every column: the stored rows need only know which keys they replace.
    by_key = known.keyed and set(schema.names) <= set(data_columns)
    renamed = {c: f"_lm_s{i}" for i, c in enumerate(key if by_key else data_columns)}
    changes = classified.filter(outcome.isin(Outcome.UPDATE.value, Outcome.DELETE.value)).select(
        (outcome == Outcome.DELETE.value).alias("_lm_s_deleted"), *[col(c).alias(n) for c, n in renamed.items()]
    )
    if by_key or known.broadcast:
        changes = F.broadcast(changes)
    on = None
    for k in key:
        equal = col(k, "t") == F.col(renamed[k])
        on = equal if on is None else on & equal
    joined = opened.read_touched().alias("t").join(changes, on=on, how="left")
    deleted = F.col("_lm_s_deleted")
    tallied, tallies = transaction.observe(
        joined,
        {"copied": F.count_if(deleted.isNull()), "updated": F.count_if(~deleted), "deleted": F.count_if(deleted)},
    )
    if by_key:
        kept = tallied.filter(deleted.isNull()).select(*[col(c, "t").alias(c) for c in schema.names])
        fresh = classified.filter(outcome.isin(Outcome.INSERT.value, Outcome.UPDATE.value))
        if known.broadcast:  # (few rows: in one new file, not one per partition of the changes)
            fresh = fresh.coalesce(1)
    else:
        update = F.coalesce(~deleted, F.lit(False))
        kept = tallied.filter(deleted.isNull() | update).select(
            *[
                (F.when(update, F.col(renamed[c])).otherwise(col(c, "t")) if c in renamed else col(c, "t")).alias(c)
                for c in schema.names
            ]
        )
        fresh = classified.filter(outcome == Outcome.INSERT.value)
    inserted = [(col(c) if c in data_columns else F.lit(None).cast(schema[c].dataType)).alias(c) for c in schema.names]
    if by_key and not known.broadcast:  # (the touched files' uneven tasks: the new rows in their tail)
        opened.write(kept, then=fresh.select(*inserted))
    else:
        opened.write(kept.unionByName(fresh.select(*inserted)))
    opened.remove_touched()
    counted = tallies()
    direct.check(counted, {"updated": known.updated, "deleted": known.deleted})
    return _merge_metrics(known, copied=counted["copied"], opened=opened)


def _with_vectors(opened: direct.Direct, classified: DataFrame, schema: StructType, known: Known) -> dict[str, int]:
    """Deletion vectors: the new rows written, the replaced and deleted rows marked in their files."""
    from pyspark.sql import functions as F

    outcome = F.col(C.OUTCOME)
    fresh = classified.filter(outcome.isin(Outcome.INSERT.value, Outcome.UPDATE.value))
    if known.broadcast:  # (few rows: one new file, whose rows later batches mark in one vector)
        fresh = fresh.coalesce(1)
    opened.write(fresh.select(*[col(c) for c in schema.names]))
    replaced = classified.filter(outcome.isin(Outcome.UPDATE.value, Outcome.DELETE.value))
    marked = opened.mark_rows(replaced, file=F.col(C.STORED_FILE), row=F.col(C.STORED_ROW))
    direct.check({"rows": marked.get("numModifiedRows", 0)}, {"rows": known.updated + known.deleted})
    figures = _merge_metrics(known, copied=0, opened=opened)
    figures["numTargetFilesRemoved"] = marked.get("numRemovedFiles", 0)
    for name in ("Added", "Removed", "Updated"):
        figures[f"numTargetDeletionVectors{name}"] = marked.get(f"numDeletionVectors{name}", 0)
    return figures


def _merge_metrics(known: Known, *, copied: int, opened: direct.Direct) -> dict[str, int]:
    """A MERGE's operation metrics for the commit (``history`` and lakemerge's result read them)."""
    added, bytes_added, bytes_removed = opened.file_figures()
    return {
        "operationNumSourceRows": known.inserted + known.updated + known.deleted,
        "numTargetRowsInserted": known.inserted,
        "numTargetRowsUpdated": known.updated,
        "numTargetRowsMatchedUpdated": known.updated,
        "numTargetRowsDeleted": known.deleted,
        "numTargetRowsMatchedDeleted": known.deleted,
        "numTargetRowsCopied": copied,
        "numTargetFilesAdded": added,
        "numTargetFilesRemoved": len(known.touched),
        "numTargetBytesAdded": bytes_added,
        "numTargetBytesRemoved": bytes_removed,
        "numTargetChangeFilesAdded": 0,
    }
