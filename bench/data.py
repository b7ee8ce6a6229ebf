"""Benchmark data: TPC-H tables from DuckDB's dbgen, and change batches drawn from them.

A table is ``orders`` (key ``o_orderkey``) written to Parquet at a scale factor. A change batch is a
fraction of the table's rows: updates of existing keys (a changed ``o_totalprice`` / ``o_comment``),
inserts of new keys above the table's largest, and deletes of existing keys, mixed 70/20/10, with
some keys appearing twice in the batch (the later sequence wins). Keys are drawn uniformly over the
table or from its most recent keys (the common CDC shape). Every row carries a ``seq`` (the batch
number times 10, plus 1 for the second copy of a duplicated key) and an ``op`` (``U`` or ``D``).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

KEY = "o_orderkey"
DATE = "o_orderdate"
#: The harness's data folder (``python -m bench --data``'s default): data, tables and, under
#: ``out``, what a run writes; outside the source tree.
ROOT = "/tmp/lakemerge-bench"
#: Where the harness and ``python -m bench.report`` write by default.
OUT = f"{ROOT}/out"


@dataclass(frozen=True)
class Batch:
    """One change batch on disk (Parquet) and what it holds."""

    path: str
    fraction: float
    shape: str
    rows: int


def tpch_extension() -> str:
    """The tpch extension file shipped in the ``duckdb-extension-tpch`` package."""
    import duckdb_extension_tpch

    root = os.path.dirname(duckdb_extension_tpch.__file__)
    found = glob.glob(os.path.join(root, "**", "*.duckdb_extension"), recursive=True)
    if not found:
        raise RuntimeError(f"no .duckdb_extension file under {root}")
    return found[0]


def generate(sf: float, out: str) -> str:
    """Write TPC-H ``orders`` at scale factor ``sf`` to ``out/orders.parquet`` (once), with the
    columns the peers store: the TPC-H columns plus ``seq`` (0) and ``o_year`` (for partitioning)."""
    import duckdb

    target = os.path.join(out, "orders.parquet")
    if os.path.exists(target):
        return target
    os.makedirs(out, exist_ok=True)
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{tpch_extension()}'")
    con.execute(f"CALL dbgen(sf={sf})")
    con.execute(
        f"COPY (SELECT *, CAST(0 AS BIGINT) AS seq, CAST(year(o_orderdate) AS INTEGER) AS o_year "
        f"FROM orders ORDER BY {KEY}) TO '{target}' (FORMAT parquet, ROW_GROUP_SIZE 100000)"
    )
    con.close()
    return target


def make_batch(table: str, out: str, *, number: int, fraction: float, shape: str, seed: int) -> Batch:
    """Write change batch ``number`` for the table at ``table`` (Parquet) to ``out``.

    ``shape`` is ``uniform`` (keys anywhere) or ``recent`` (keys among the newest 5 % of keys).
    Batches are drawn from the original table, so later batches may update keys an earlier one
    deleted (they are inserted again) — every peer sees the same sequence of batches.
    """
    import duckdb

    path = os.path.join(out, f"batch-{shape}-{fraction:g}-{number}.parquet")
    con = duckdb.connect()
    n_max = con.execute(f"SELECT max({KEY}), count(*) FROM '{table}'").fetchone()
    assert n_max is not None
    max_key, total = int(n_max[0]), int(n_max[1])
    rows = max(10, int(total * fraction / 100.0))
    n_upd, n_ins = int(rows * 0.7), int(rows * 0.2)
    n_del = rows - n_upd - n_ins
    pool = f"(SELECT * FROM '{table}' WHERE {KEY} > {int(max_key * 0.95)})" if shape == "recent" else f"'{table}'"
    columns = "o_custkey, o_orderstatus, o_totalprice, o_orderdate, o_orderpriority, o_clerk, o_shippriority, o_comment"
    seq = number * 10
    if not os.path.exists(path):
        con.execute(
            f"""
            CREATE TEMP TABLE picked AS
              SELECT *, row_number() OVER () AS rn
                FROM (SELECT * FROM {pool} USING SAMPLE reservoir({n_upd + n_del} ROWS) REPEATABLE ({seed}));
            CREATE TEMP TABLE changes AS
              SELECT {KEY}, o_custkey, o_orderstatus, o_totalprice + 1.0 AS o_totalprice, o_orderdate,
                     o_orderpriority, o_clerk, o_shippriority, 'upd{number}' AS o_comment,
                     CAST({seq} AS BIGINT) AS seq, o_year, 'U' AS op
                FROM picked WHERE rn <= {n_upd}
              UNION ALL
              SELECT {KEY}, {columns}, CAST({seq} AS BIGINT), o_year, 'D' FROM picked WHERE rn > {n_upd}
              UNION ALL
              SELECT {KEY} + {max_key} + {number} * {rows * 10} AS {KEY}, o_custkey, o_orderstatus, o_totalprice,
                     o_orderdate, o_orderpriority, o_clerk, o_shippriority, 'ins{number}', CAST({seq} AS BIGINT),
                     o_year, 'U'
                FROM (SELECT * FROM picked LIMIT {n_ins});
            """
        )
        # Duplicate keys: ~2 % of the updates appear again with a later sequence and another price.
        con.execute(
            f"""
            COPY (
              SELECT * REPLACE (CAST(o_totalprice AS DECIMAL(15, 2)) AS o_totalprice) FROM (
              SELECT * FROM changes
              UNION ALL
              SELECT {KEY}, o_custkey, o_orderstatus, o_totalprice + 2.0, o_orderdate, o_orderpriority, o_clerk,
                     o_shippriority, 'dup{number}', seq + 1, o_year, op
                FROM changes WHERE op = 'U' AND o_comment LIKE 'upd%' AND hash({KEY}) % 50 = 0)
            ) TO '{path}' (FORMAT parquet)
            """
        )
    count = con.execute(f"SELECT count(*) FROM '{path}'").fetchone()
    con.close()
    return Batch(path=path, fraction=fraction, shape=shape, rows=int(count[0]) if count else 0)
