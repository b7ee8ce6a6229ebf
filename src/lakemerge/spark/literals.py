"""Values that change from batch to batch, kept out of the code Spark generates for a query.

Spark writes a number literal into the Java source it compiles for a stage, so a query that differs
from the batch before only by such a literal (a batch number, a key span) is new code: compiled by
Janino and then run cold by the JVM, every batch. A literal array is passed to the compiled code as
an object instead, and an element of it stays an element, not a literal, as long as its index is
computed from the data, which the optimizer cannot fold (bench/RESULTS.md, "Eighteenth session":
8 classes a batch, and 6-9 % of a batch's time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


def opaque(value: int | float, row: Column, kind: str) -> Column:
    """``value`` as a ``kind`` column (``bigint``, ``double``) whose value Spark's generated code
    reads from an object: an element of a literal array of two copies of it, indexed by a hash of
    ``row`` (any column of the row) modulo 2, whatever the optimizer proves of that column."""
    from pyspark.sql import functions as F

    both = F.array(F.lit(value).cast(kind), F.lit(value).cast(kind))
    return both[F.pmod(F.hash(row), F.lit(2))]
