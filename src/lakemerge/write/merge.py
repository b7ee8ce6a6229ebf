"""Write the classified changes to the Delta table in exactly one commit.

- No table yet: the inserts are written as the table's first commit (partitioned as configured).
- A batch with nothing to write makes a metadata-only commit, so that its record exists.
- A batch whose only writes are inserts (keys the table lacks) is appended: no join with the table.
- Otherwise one Delta MERGE on the key. Its clauses re-check the sequence against the stored row
  so that a row changed since classification is never overwritten by an older change.
  New feed columns are added to the table (schema evolution); table columns missing from the feed
  keep their stored values on update and are null on insert.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col, quoted
from lakemerge.config.table import TableConfig
from lakemerge.spark.backends import backend
from lakemerge.table import store
from lakemerge.table.prune import KeyRanges
from lakemerge.write.classify import WRITES, Outcome, newer_or_equal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def write_changes(
    spark: SparkSession,
    table: TableConfig,
    classified: DataFrame,
    *,
    data_columns: Sequence[str],
    exists: bool,
    writes: int,
    txn_version: int,
    partial: Sequence[str] = (),
    truncate_before: str | None = None,
    ranges: KeyRanges | None = None,
    inserts_only: bool = False,
    regroup: bool = False,
) -> None:
    """Commit the ``insert``/``update``/``delete`` rows of ``classified`` to ``table.path``.

    ``ranges`` (key ranges covering the batch's keys) join the MERGE condition, so that Delta
    skips the files outside them. ``writes`` is how many rows the batch writes. When it is zero on
    an existing table (every change late, or deletes of absent keys), Delta would make no commit at
    all; a metadata-only commit then records the batch, so its files are never applied again. It
    sets the table property ``lakemerge.batch`` to the batch number, so that two such commits racing conflict in Delta.
    With ``inserts_only`` (classification found no stored row for any change that writes), the
    inserts are appended (new feed columns added); a concurrent lakemerge writer is still stopped
    by the batch number's idempotent transaction. ``truncate_before``: the batch's truncate, as the
    SQL of its sequence (rows older than it go). ``regroup`` deals the changes round-robin before
    the MERGE, for changes partitioned by the key into fewer partitions than the table's rewrite
    should use.
    """
    from pyspark.sql import functions as F

    inserts = classified.filter(F.col(C.OUTCOME) == Outcome.INSERT.value).select(*[col(c) for c in data_columns])
    if not exists:
        store.create_table(inserts, table)
        return
    if inserts_only and writes > 0 and truncate_before is None:
        store.append_rows(inserts, table)
        return

    if writes == 0:
        store.record_only(spark, table.path, txn_version)
        return

    extra = [F.col(C.AFTER_DELETE)] if partial else []
    source = classified.filter(F.col(C.OUTCOME).isin([o.value for o in WRITES])).select(
        *[col(c) for c in data_columns], F.col(C.OP), *extra
    )
    if regroup:
        # The changes are hashed on the key into as few partitions as a small batch needs
        # (lakemerge.spark.tuning); Spark would shuffle the table into those same few for the
        # join and rewrite every touched file from that many tasks. Partitions dealt round-robin
        # carry no key, so the join is planned with the session's shuffle partitions instead.
        source = source.repartition(backend(spark).parallelism())
    on = " AND ".join(f"t.{quoted(k)} = s.{quoted(k)}" for k in table.key)
    if ranges is not None and truncate_before is None:
        # Target-only conjuncts of the condition are what Delta skips files with.
        on = f"{on} AND {ranges.predicate_sql('t')}"
    fresh = newer_or_equal("s", "t", table.sequence_columns)
    values = {quoted(c): f"s.{quoted(c)}" for c in data_columns}
    stored = "struct(" + ", ".join(f"t.{quoted(c)}" for c in table.sequence_columns) + ")"
    # A null means "unchanged", unless the batch deleted (or truncated) the stored row before.
    fresh_start = f"s.{C.AFTER_DELETE}"
    if truncate_before is not None:
        fresh_start = f"({fresh_start} OR {stored} < {truncate_before})"
    updates = dict(values)
    for c in partial:
        name = quoted(c)
        updates[name] = f"CASE WHEN {fresh_start} THEN s.{name} ELSE coalesce(s.{name}, t.{name}) END"
    clauses = [
        f"WHEN MATCHED AND s.{C.OP} = 'D' AND {fresh} THEN DELETE",
        store.when_updated(f"s.{C.OP} = 'U' AND {fresh}", updates),
        store.when_inserted(f"s.{C.OP} = 'U'", values),
    ]
    if truncate_before is not None:
        clauses.append(f"WHEN NOT MATCHED BY SOURCE AND {stored} < {truncate_before} THEN DELETE")
    store.merge_into(spark, table.path, source, on=on, clauses=clauses)
