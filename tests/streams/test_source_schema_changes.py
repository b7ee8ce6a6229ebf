"""A source's tables change their columns as the database's do, by the policy of the source's
defaults or of a table's own section (docs/semantics.md §7 Schema drift): micro-batches given to the
source's stream as Spark's Kafka source gives them, without a broker."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import deltalake
import pytest

import lakemerge
from lakemerge.streams.source_flow import source_flow
from tests.feeds.debezium_events import Table
from tests.helpers import read_table, table_columns, table_version
from tests.streams.test_kafka_sources import ORDERS, message_key, order

V1 = Table("customers", {"id": "int", "name": "text", "born": "date"})
#: ``born`` dropped, ``email`` added.
V2 = Table("customers", {"id": "int", "name": "text", "email": "text"})
#: ``born`` now text (an incompatible type).
V3 = Table("customers", {"id": "int", "name": "text", "born": "text"})
#: ``score`` as a decimal, then of more digits.
SCORED = Table("customers", {"id": "int", "name": "text", "score": "numeric(6,2)"})
WIDER = Table("customers", {"id": "int", "name": "text", "score": "numeric(9,3)"})


class Stream:
    """The source ``shop``'s stream, fed one micro-batch at a time."""

    def __init__(self, spark: Any, root: Path, defaults: dict[str, Any], **tables: dict[str, Any]) -> None:
        self.spark, self.root, self.offset = spark, root, 0
        config = {
            "sources": {
                "shop": {
                    "bootstrap_servers": "127.0.0.1:9",
                    "topic_pattern": "shop[.].*",
                    "table_path": str(root / "lake" / "{table}"),
                    "checkpoint": str(root / "checkpoint"),
                    "transactions": "micro-batch",
                    "defaults": defaults,
                    "tables": tables,
                }
            }
        }
        self.flow = source_flow(lakemerge.PipelineConfig.model_validate(config), "shop")
        self.epoch = 0

    def apply(self, *events: tuple[Table, str, dict[str, Any]]) -> list[lakemerge.BatchResult]:
        """One micro-batch of ``(table, op, row)`` events, each at the next offset of partition 0."""
        rows = []
        for table, op, row in events:
            value = table.event(op, row if op == "d" else None, None if op == "d" else row, 100 + self.offset)
            rows.append((message_key(table, row).encode(), value.encode(), f"shop.public.{table.name}", 0, self.offset))
            self.offset += 1
        frame = self.spark.createDataFrame(rows, "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")
        self.epoch += 1
        return self.flow.apply(frame, self.epoch)

    def table(self, name: str = "customers") -> Path:
        return self.root / "lake" / name


def born(year: int) -> dt.date:
    return dt.date(year, 1, 1)


def test_a_dropped_column_nulled_and_a_new_one_added_by_the_sources_defaults(spark: Any, tmp_path: Path) -> None:
    stream = Stream(spark, tmp_path, {"schema_changes": {"dropped_column": "null"}})
    stream.apply(
        (V1, "c", {"id": 1, "name": "Ada", "born": born(1990)}), (V1, "c", {"id": 2, "name": "Bo", "born": None})
    )
    stream.apply((V1, "u", {"id": 2, "name": "Bo", "born": born(1991)}))
    results = stream.apply(
        (V2, "u", {"id": 1, "name": "Ada L", "email": "ada@example.com"}),
        (V2, "c", {"id": 3, "name": "Cy", "email": None}),
    )
    assert [sorted(str(c) for c in r.schema_changes) for r in results] == [["born nulled", "email added (string)"]]
    assert read_table(stream.table(), ["id", "name", "born", "email"]) == [
        {"id": 1, "name": "Ada L", "born": None, "email": "ada@example.com"},
        {"id": 2, "name": "Bo", "born": born(1991), "email": None},
        {"id": 3, "name": "Cy", "born": None, "email": None},
    ]
    last = deltalake.DeltaTable(str(stream.table())).history(1)[0]
    changes = json.loads(last["userMetadata"])["schema_changes"]
    assert sorted(c["change"] for c in changes) == ["added", "nulled"]


def test_a_tables_own_policy_overrides_the_defaults_and_drops_the_column(spark: Any, tmp_path: Path) -> None:
    stream = Stream(
        spark,
        tmp_path,
        {"schema_changes": {"dropped_column": "null"}},
        customers={"schema_changes": {"dropped_column": "drop"}},
    )
    stream.apply((V1, "c", {"id": 1, "name": "Ada", "born": born(1990)}), (ORDERS, "c", order(1, "1.00", "n")))
    stream.apply((V2, "u", {"id": 1, "name": "Ada", "email": "a@x"}))
    assert "born" not in table_columns(stream.table()) and "email" in table_columns(stream.table())
    assert read_table(stream.table(), ["id", "name", "email"]) == [{"id": 1, "name": "Ada", "email": "a@x"}]


def test_a_refused_change_stops_the_stream_naming_topic_partition_and_offset(spark: Any, tmp_path: Path) -> None:
    stream = Stream(spark, tmp_path, {}, customers={"schema_changes": {"new_column": "fail"}})
    stream.apply((V1, "c", {"id": 1, "name": "Ada", "born": born(1990)}))
    with pytest.raises(lakemerge.SchemaError) as info:
        stream.apply(
            (V1, "u", {"id": 1, "name": "Ada", "born": born(1990)}), (V2, "u", {"id": 1, "name": "A", "email": "a@x"})
        )
    message = str(info.value)
    assert "table 'customers'" in message and "column 'email' is not in the table" in message
    assert "topic shop.public.customers, partition 0, offset 2" in message
    assert table_version(stream.table()) == 0


def test_an_incompatible_type_quarantines_the_events_that_do_not_fit(spark: Any, tmp_path: Path) -> None:
    stream = Stream(spark, tmp_path, {"schema_changes": {"incompatible_type": "quarantine"}, "max_bad_rows": 10})
    stream.apply(
        (V1, "c", {"id": 1, "name": "Ada", "born": born(1990)}), (V1, "c", {"id": 2, "name": "Bo", "born": None})
    )
    (result,) = stream.apply(
        (V3, "u", {"id": 1, "name": "Ada", "born": "1990-02-03"}), (V3, "u", {"id": 2, "name": "Bo", "born": "someday"})
    )
    assert (result.metrics.updated, result.metrics.rows_bad) == (1, 1)
    assert read_table(stream.table(), ["id", "born"]) == [
        {"id": 1, "born": dt.date(1990, 2, 3)},
        {"id": 2, "born": None},
    ]
    (bad,) = read_table(tmp_path / "lake" / "customers__quarantine", ["file", "row", "reason"])
    assert bad["file"].endswith("topic shop.public.customers, partition 0, offset") and bad["row"] == 3
    assert bad["reason"] == "column 'born' is STRING in the feed but DATE in the table: the value does not fit"


def test_a_decimal_of_more_digits_widens_the_column_when_the_policy_enables_it(spark: Any, tmp_path: Path) -> None:
    stream = Stream(spark, tmp_path, {"schema_changes": {"widened_type": "enable"}})
    stream.apply((SCORED, "c", {"id": 1, "name": "Ada", "score": Decimal("1.25")}))
    (result,) = stream.apply((WIDER, "u", {"id": 1, "name": "Ada", "score": Decimal("123456.125")}))
    assert [str(c) for c in result.schema_changes] == ["score widened decimal(6,2) → decimal(9,3)"]
    rows = spark.read.format("delta").load(str(stream.table())).collect()
    assert [r["score"] for r in rows] == [Decimal("123456.125")]


def test_a_column_dropped_within_a_micro_batch_keeps_its_values_by_default(spark: Any, tmp_path: Path) -> None:
    """The micro-batch holding the drop has events before it (with the column) and after it
    (without): a key's later events keep what its earlier ones or the table gave it."""
    stream = Stream(spark, tmp_path, {})
    stream.apply(
        (V1, "c", {"id": 1, "name": "Ada", "born": born(1990)}),
        (V1, "c", {"id": 2, "name": "Bo", "born": born(1991)}),
        (V1, "c", {"id": 3, "name": "Cy", "born": born(1992)}),
    )
    (result,) = stream.apply(
        (V1, "u", {"id": 1, "name": "Ada", "born": born(1995)}),
        (V2, "u", {"id": 1, "name": "Ada L", "email": "a@x"}),
        (V2, "u", {"id": 2, "name": "Bo L", "email": None}),
        (V2, "c", {"id": 4, "name": "Di", "email": "d@x"}),
    )
    assert [str(c) for c in result.schema_changes] == ["email added (string)"]
    assert read_table(stream.table(), ["id", "name", "born", "email"]) == [
        {"id": 1, "name": "Ada L", "born": born(1995), "email": "a@x"},
        {"id": 2, "name": "Bo L", "born": born(1991), "email": None},
        {"id": 3, "name": "Cy", "born": born(1992), "email": None},
        {"id": 4, "name": "Di", "born": None, "email": "d@x"},
    ]
    # A later micro-batch without the column keeps it too.
    stream.apply((V2, "u", {"id": 3, "name": "Cy L", "email": "c@x"}))
    assert read_table(stream.table(), ["id", "born"])[2] == {"id": 3, "born": born(1992)}
    assert read_table(stream.table(), ["id", "born"])[0] == {"id": 1, "born": born(1995)}
