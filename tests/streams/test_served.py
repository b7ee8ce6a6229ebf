"""A micro-batch applied in a Spark Connect server's Python reports its failure to the client in one
line: a lakemerge error as the server's step raised it (kind, exit code and message whole), a
failure of the worker by its exception line, a server without lakemerge by what to install."""

from __future__ import annotations

from typing import Any

import pytest

from lakemerge.errors import ConfigError, InputError, LakemergeError
from lakemerge.streams import queries, served


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
