"""Decide, for each collapsed change, what it does to the table (PRODUCT.md §Semantics 1).

Outcomes:

- ``insert``: an upsert for a key the table lacks;
- ``update``: an upsert whose sequence is at least the stored row's (an exact tie goes to the
  incoming change);
- ``delete``: a delete whose sequence is at least the stored row's;
- ``late``: a change older than the stored row: ignored and counted;
- ``absent``: a delete for a key the table lacks: nothing to do.

Only the key and sequence columns of the table are read (Parquet prunes the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from lakemerge.feeds import columns as C

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class Outcome(StrEnum):
    """What one collapsed change does to the table."""

    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"
    LATE = "late"
    ABSENT = "absent"


WRITES = (Outcome.INSERT, Outcome.UPDATE, Outcome.DELETE)


def newer_or_equal(source: str, target: str, sequence: Sequence[str]) -> str:
    """SQL condition: the ``source`` alias's sequence is at least the ``target`` alias's,
    comparing the sequence columns left to right."""
    left = ", ".join(f"{source}.`{c}`" for c in sequence)
    right = ", ".join(f"{target}.`{c}`" for c in sequence)
    return f"struct({left}) >= struct({right})"


def classify(
    changes: DataFrame,
    table: DataFrame | None,
    *,
    key: Sequence[str],
    sequence: Sequence[str],
    partition_by: Sequence[str] = (),
    truncate_before: Column | None = None,
) -> DataFrame:
    """Add ``_lm_outcome`` to each collapsed change, comparing with ``table`` (``None``: no table yet).

    Matched changes also get the stored row's data file (``_lm_t_file``) and partition values
    (``_lm_t_partition``), for dry runs to count what a batch touches. Stored rows older than the
    batch's truncate (``truncate_before``) count as absent: the truncate removes them."""
    from pyspark.sql import functions as F

    op = F.col(C.OP)
    if table is None:
        outcome: Column = F.when(op == "D", F.lit(Outcome.ABSENT.value)).otherwise(F.lit(Outcome.INSERT.value))
        return changes.withColumn(C.OUTCOME, outcome)
    stored = table.select(
        *[F.col(f"`{k}`").alias(f"_lm_t_{i}") for i, k in enumerate(key)],
        F.struct(*[F.col(f"`{c}`") for c in sequence]).alias("_lm_t_seq"),
        F.lit(True).alias("_lm_t_found"),
        F.col("_metadata.file_path").alias(C.STORED_FILE),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in partition_by])).alias(C.STORED_PARTITION)
        if partition_by
        else F.lit(None).cast("string").alias(C.STORED_PARTITION),
    )
    condition = None
    for i, k in enumerate(key):
        part = F.col(f"`{k}`") == F.col(f"_lm_t_{i}")
        condition = part if condition is None else condition & part
    joined = changes.join(stored, on=condition, how="left")
    incoming = F.struct(*[F.col(f"`{c}`") for c in sequence])
    found = F.col("_lm_t_found").isNotNull()
    if truncate_before is not None:
        found = found & (F.col("_lm_t_seq") >= truncate_before)
    outcome = (
        F.when(~found & (op == "D"), F.lit(Outcome.ABSENT.value))
        .when(~found, F.lit(Outcome.INSERT.value))
        .when(incoming < F.col("_lm_t_seq"), F.lit(Outcome.LATE.value))
        .when(op == "D", F.lit(Outcome.DELETE.value))
        .otherwise(F.lit(Outcome.UPDATE.value))
    )
    return joined.withColumn(C.OUTCOME, outcome).drop(
        *[f"_lm_t_{i}" for i in range(len(key))], "_lm_t_seq", "_lm_t_found"
    )
