"""Over Spark Connect, ``[spark] landing`` says who lists the files, once per session and scheme: a
server on this machine lets the client list its own disk (``auto``); ``server`` lists through
Spark, whose files cannot be moved from the client (a run with an archive refuses in one line
before any batch); ``client`` refuses a scheme the client cannot reach. (``--backend connect``.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from lakemerge.batch.run import run_tables
from lakemerge.spark.remote import SESSION_DEFAULTS
from lakemerge.storage.arrow import ArrowFileSystem
from lakemerge.storage.filesystems import filesystem
from lakemerge.storage.server import ServerFileSystem
from tests.helpers import read_table, write_lines
from tests.oracle import Oracle


@pytest.fixture
def connect(spark: Any, backend_name: str) -> Any:
    if backend_name != "connect":
        pytest.skip("a Spark Connect session (--backend connect)")
    return spark


@pytest.fixture
def other(connect: Any) -> Iterator[Any]:
    """Another session on the same server, to be given its own ``landing``."""
    session = type(connect).builder.remote(f"sc://{connect.client._builder.endpoint}").create()
    for key, value in SESSION_DEFAULTS.items():
        session.conf.set(key, value)
    yield session
    session.stop()


def _table(tmp_path: Path, *, archive: bool) -> lakemerge.TableConfig:
    feed = lakemerge.FeedConfig(
        location=(str(tmp_path / "landing"),), format="csv", header=True, op_column="op",
        types={"id": "int", "seq": "bigint"}, archive=str(tmp_path / "archive") if archive else None,
    )  # fmt: skip
    return lakemerge.TableConfig(name="t", path=str(tmp_path / "table"), key=("id",), sequence=("seq",), feed=feed)


def test_a_server_on_this_machine_lets_the_client_list_its_own_disk(connect: Any, tmp_path: Path) -> None:
    assert isinstance(filesystem(connect, str(tmp_path)), ArrowFileSystem)
    assert filesystem(connect, str(tmp_path)) is filesystem(connect, f"file:{tmp_path}/x"), "once per scheme"


def test_the_server_lists_and_nothing_is_archived(other: Any, tmp_path: Path) -> None:
    other.conf.set("spark.lakemerge.landing", "server")
    assert isinstance(filesystem(other, str(tmp_path)), ServerFileSystem)
    files = [
        [{"id": 1, "seq": 1, "op": "I", "v": "a"}, {"id": 2, "seq": 1, "op": "I", "v": "b"}],
        [{"id": 1, "seq": 2, "op": "U", "v": "c"}, {"id": 2, "seq": 2, "op": "D", "v": None}],
    ]
    for n, rows in enumerate(files):
        lines = [f"{r['id']},{r['seq']},{r['op']},{r['v'] or ''}" for r in rows]
        write_lines(tmp_path / "landing" / f"d{n}" / "x.csv", ["id,seq,op,v", *lines])
    write_lines(tmp_path / "landing" / "_hidden.csv", ["id,seq,op,v", "9,9,I,z"])
    with pytest.raises(
        lakemerge.ConfigError, match=r"cannot archive applied files to .*archive: .*landing = \"client\""
    ):
        run_tables([_table(tmp_path, archive=True)], spark=other)
    assert not (tmp_path / "table").exists(), "refused before any batch"
    [result] = run_tables([_table(tmp_path, archive=False)], spark=other)
    oracle = Oracle(key=("id",), seq="seq", op="op")
    counts = oracle.apply(files)
    assert [f.path for f in result.files] == [f"file:{tmp_path}/landing/d{n}/x.csv" for n in range(2)]
    assert result.ignored_entries == (), "Spark's listing names no hidden entry"
    assert (result.metrics.inserted, result.metrics.superseded) == (counts.inserted, counts.superseded)
    expected = [{"id": r["id"], "v": r["v"]} for r in oracle.rows()]
    assert read_table(tmp_path / "table", ["id", "v"]) == expected


def test_a_client_that_cannot_reach_a_scheme_or_an_unknown_choice_is_refused(other: Any) -> None:
    other.conf.set("spark.lakemerge.landing", "client")
    with pytest.raises(lakemerge.ConfigError, match=r'landing = "client": this process cannot reach abfss: paths'):
        filesystem(other, "abfss://c@account.dfs.core.windows.net/landing")
    other.conf.set("spark.lakemerge.landing", "everywhere")
    with pytest.raises(lakemerge.ConfigError, match="'everywhere' is not one of auto, client, server"):
        filesystem(other, "wasbs://c@account.blob.core.windows.net/landing")
