"""A micro-batch applied in a Spark Connect server's Python reports its failure to the client in one
line: a lakemerge error as the server's step raised it (kind, exit code and message whole), a
failure of the worker by its exception line, a server without lakemerge by what to install; and its
batches through the tables' commits, a source's from the tables its points list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.errors import ConfigError, InputError, LakemergeError
from lakemerge.streams import queries, served
from lakemerge.streams.source_flow import source_flow
from tests.feeds.debezium_events import Table
from tests.streams.test_kafka_sources import CUSTOMERS, ORDERS, message_key, order


def _as_the_query_reports(error: BaseException) -> str:
    """A query's failure as a Connect client receives it: the server's traceback of the Python
    worker, with the step's exception last, inside Spark's own text."""
    return (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: An exception was raised by the Python "
        "Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "/srv/python/pyspark/sql/connect/streaming/worker/foreach_batch_worker.py", line 90, in process\n'
        "    func(batch_df, batch_id)\n"
        f"{type(error).__name__}: {error}\n\n\tat org.apache.spark.api.python.StreamingPythonRunner.run"
    )


@pytest.mark.parametrize(
    "raised",
    [
        InputError("landing/a.csv, row 3: not a number: 'x' {with braces} and \"quotes\""),
        ConfigError("table 't': [tables.t.stream] says nothing"),
        LakemergeError("plain"),
    ],
)
def test_a_lakemerge_error_of_the_servers_step_is_found_again_whole(raised: LakemergeError) -> None:
    def step(frame: Any, epoch: int) -> None:
        raise raised

    with pytest.raises(RuntimeError) as caught:
        served.ServedBatch(step)(None, 0)
    found = served.served_error(_as_the_query_reports(caught.value))
    assert found is not None
    assert type(found) is type(raised) and str(found) == str(raised) and found.exit_code == raised.exit_code


def test_a_failure_without_lakemerges_line_is_none_of_its_errors() -> None:
    assert served.served_error(_as_the_query_reports(ValueError("boom"))) is None
    assert served.served_error(served.MARK + "{not json") is None


def test_a_worker_failure_is_its_exception_line() -> None:
    assert served.worker_error(_as_the_query_reports(ValueError("boom"))) == "ValueError: boom"
    assert served.worker_error("[CANNOT_CONNECT] no traceback here") is None


def test_a_server_whose_python_lacks_lakemerge_says_what_to_install() -> None:
    failure = _as_the_query_reports(ModuleNotFoundError("No module named 'lakemerge'"))
    assert served.missing_lakemerge(failure)
    error = queries._unstarted("orders", RuntimeError(failure))
    assert isinstance(error, ConfigError) and "install lakemerge in the server's Python" in str(error)


def test_a_query_the_server_cannot_start_is_one_line_naming_the_stream() -> None:
    failure = RuntimeError("Python worker failed to connect back.\n\nJVM stacktrace:\norg.apache.spark.SparkException")
    error = queries._unstarted("orders", failure)
    assert isinstance(error, ConfigError) and error.exit_code == 2
    text = str(error)
    assert "\n" not in text and "could not start the query" in text and "Python worker failed to connect back" in text
    assert queries._query_name("orders") in text


def _records(spark: Any, events: list[tuple[Table, int, int, dict[str, Any]]]) -> Any:
    """A micro-batch of Spark's Kafka source: each event of ``table`` (a create of ``row``) at its
    partition and offset of the topic ``shop.public.<table>``."""
    rows = [
        (message_key(t, row).encode(), t.event("c", None, row, 100 + at).encode(), f"shop.public.{t.name}", p, at)
        for t, p, at, row in events
    ]
    return spark.createDataFrame(rows, "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT")


def test_a_sources_batches_applied_by_the_server_reach_the_client(spark: Any, tmp_path: Path) -> None:
    """A source's query lists no tables up front: its tables are created by their first events.
    The client reports what the server's micro-batches committed from the tables the source's last
    point lists, since the versions they had as the query started: a table the micro-batch created
    included, a commit from before the query left out, each batch as the micro-batch returned it."""
    config = lakemerge.PipelineConfig.model_validate(
        {
            "sources": {
                "shop": {
                    "bootstrap_servers": "127.0.0.1:9",
                    "topic_pattern": "shop[.].*",
                    "table_path": str(tmp_path / "lake" / "{table}"),
                    "checkpoint": str(tmp_path / "checkpoint"),
                }
            }
        }
    )
    flow = source_flow(config, "shop")
    assert flow.tables == () and flow.tables_now(spark) == ()
    flow.apply(_records(spark, [(ORDERS, 0, 0, order(1, "1.00", "before the query"))]), 0)
    seen = served.versions(spark, flow.tables_now(spark))
    assert seen == {str(tmp_path / "lake" / "orders"): 0}

    events = [(ORDERS, 0, 1, order(2, "2.00", "b")), (CUSTOMERS, 1, 0, {"id": 7, "name": "Ada", "born": None})]
    applied = flow.apply(_records(spark, events), 1)
    reported = served.committed(spark, flow.tables_now(spark), flow.source, seen)

    def shown(results: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((r.table, r.path, r.version, r.batch_id, r.source_batch, r.metrics) for r in results)

    assert [r.table for r in reported] == ["customers", "orders"]
    assert shown(reported) == shown(applied) and {r.source_batch for r in reported} == {2}
    assert served.committed(spark, flow.tables_now(spark), flow.source, seen) == [], "each reported once"
