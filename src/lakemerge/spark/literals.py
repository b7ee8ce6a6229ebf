"""Values that change from batch to batch, kept out of the code Spark generates for a query.

Spark writes a number literal into the Java source it compiles for a stage, so a query that differs
from the batch before only by such a literal (a batch number, a key span) is new code: compiled by
Janino and then run cold by the JVM, every batch. A literal array is passed to the compiled code as
an object instead, and an element of it stays an element, not a literal, as long as its index is
computed from the data, which the optimizer cannot fold (bench/RESULTS.md, "Generated code per batch":
8 classes a batch, and 6-9 % of a batch's time).
"""

from __future__ import annotations


def sql_value(value: object) -> str:
    """A Python value of a key's bounds (an integer, a decimal, a date) as a SQL literal."""
    import datetime
    import decimal

    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return f"{value}L" if abs(value) > 2**31 - 1 else str(value)
    if isinstance(value, decimal.Decimal):
        return f"{value}BD"
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return f"DATE'{value.isoformat()}'"
    raise TypeError(f"no SQL literal for a {type(value).__name__}")


def opaque(value: int | float, row: str, kind: str) -> str:
    """``value`` as a SQL expression of type ``kind`` (``bigint``, ``double``) whose value Spark's
    generated code reads from an object: an element of a literal array of two copies of it, indexed
    by a hash of ``row`` (a SQL expression of the row, such as a quoted column name) modulo 2,
    whatever the optimizer proves of that column. (SQL text: built of PySpark's functions, it cost
    17 calls into the JVM.)"""
    number = f"CAST({int(value)} AS BIGINT)" if kind == "bigint" else f"CAST('{float(value)!r}' AS DOUBLE)"
    return f"array({number}, {number})[pmod(hash({row}), 2)]"
