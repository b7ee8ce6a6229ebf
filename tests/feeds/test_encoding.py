"""Bytes that are not UTF-8: bad records naming file, row and the offending byte, or, with the
feed's ``encoding``, decoded as asked; never a silent U+FFFD (docs/semantics.md §9)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import lakemerge
from tests.helpers import read_table

HEADER = b"id,seq,brand\n"


def table(tmp_path: Path, name: str = "t", **feed: object) -> lakemerge.TableConfig:
    settings: dict[str, object] = {"location": (str(tmp_path / "in"),), "format": "csv", "header": True}
    settings.update(feed)
    settings.setdefault("types", {"id": "int", "seq": "bigint"})
    return lakemerge.TableConfig(
        name=name,
        path=str(tmp_path / name),
        key=("id",),
        sequence=("seq",),
        max_bad_rows=10,
        feed=lakemerge.FeedConfig(**settings),  # type: ignore[arg-type]
    )


def land(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_latin1_byte_in_a_utf8_feed_is_a_bad_row_with_its_byte(spark: object, tmp_path: Path) -> None:
    land(tmp_path, "a.csv", HEADER + b"1,1,caf\xe9\n2,1,plain\n3,1,genuine \xef\xbf\xbd\n4,1,x\xff\n")
    t = table(tmp_path)
    result = lakemerge.apply_table(t, spark=spark)
    assert (result.metrics.rows_read, result.metrics.rows_bad, result.metrics.inserted) == (4, 2, 2)
    # A U+FFFD the file really holds (bytes EF BF BD) is valid UTF-8: a value like any other.
    assert read_table(t.path, ["id", "brand"]) == [{"id": 2, "brand": "plain"}, {"id": 3, "brand": "genuine \ufffd"}]
    rows = {q.row: q for q in lakemerge.quarantine(t, spark=spark)}
    assert sorted(rows) == [2, 5]
    assert "invalid UTF-8: byte E9 at byte 8 of the line" in rows[2].reason
    assert "invalid UTF-8: byte FF at byte 6 of the line" in rows[5].reason
    assert rows[2].file.endswith("a.csv") and rows[2].record == "1,1,caf\ufffd"


def test_with_the_default_threshold_the_batch_fails_naming_file_row_and_byte(spark: object, tmp_path: Path) -> None:
    land(tmp_path, "a.csv", HEADER + b"1,1,ok\n2,1,caf\xe9\n")
    t = table(tmp_path).model_copy(update={"max_bad_rows": 0})
    with pytest.raises(lakemerge.InputError) as info:
        lakemerge.apply_table(t, spark=spark)
    assert info.value.row == 3 and str(info.value.path).endswith("a.csv")
    assert "byte E9" in str(info.value) and "nothing was applied" in str(info.value)
    assert not Path(t.path).exists()


def test_an_explicit_encoding_decodes_as_asked(spark: object, tmp_path: Path) -> None:
    land(tmp_path, "a.csv", HEADER + "1,1,café\n".encode("latin-1"))
    t = table(tmp_path, encoding="ISO-8859-1")
    assert lakemerge.apply_table(t, spark=spark).metrics.rows_bad == 0
    assert read_table(t.path, ["brand"]) == [{"brand": "café"}]


def test_text_and_json_feeds_and_a_bad_header(spark: object, tmp_path: Path) -> None:
    land(tmp_path, "a.txt", b"1|1|caf\xe9\n2|1|ok\n")
    text = table(tmp_path, "text", format="text", header=False, delimiter_regex="\\|", columns=("id", "seq", "brand"))
    assert lakemerge.apply_table(text, spark=spark).metrics.rows_bad == 1
    [bad] = lakemerge.quarantine(text, spark=spark)
    assert bad.row == 1 and "byte E9 at byte 8" in bad.reason

    (tmp_path / "in" / "a.txt").unlink()
    land(tmp_path, "h.txt", b"id|seq|brand\n3|1|caf\xe9\n4|1|ok\n")
    headed = table(tmp_path, "headed", format="text", delimiter_regex="\\|")
    result = lakemerge.apply_table(headed, spark=spark)
    assert (result.metrics.rows_read, result.metrics.rows_bad) == (2, 1)  # the header line is no record
    assert [q.row for q in lakemerge.quarantine(headed, spark=spark)] == [2]
    assert read_table(headed.path, ["id", "brand"]) == [{"id": 4, "brand": "ok"}]

    (tmp_path / "in" / "h.txt").unlink()
    ok = json.dumps({"id": 2, "seq": 1, "brand": "ok"}).encode()
    land(tmp_path, "a.json", b'{"id": 1, "seq": 1, "brand": "caf\xe9"}\n' + ok + b"\n")
    js = table(tmp_path, "json", format="json", header=False, types={})
    assert lakemerge.apply_table(js, spark=spark).metrics.rows_bad == 1
    assert read_table(js.path, ["id", "brand"]) == [{"id": 2, "brand": "ok"}]

    (tmp_path / "in" / "a.json").unlink()
    land(tmp_path, "m.csv", HEADER + b'1,1,"two\nlines caf\xe9"\n')
    land(tmp_path, "n.csv", HEADER + b'2,1,"real\n\xef\xbf\xbd"\n')
    multi = table(tmp_path, "multi", multiline=True)
    assert lakemerge.apply_table(multi, spark=spark).metrics.rows_bad == 1
    assert read_table(multi.path, ["id"]) == [{"id": 2}]

    (tmp_path / "in" / "m.csv").unlink()
    (tmp_path / "in" / "n.csv").unlink()
    land(tmp_path, "h.csv", b"id,seq,br\xe9nd\n1,1,x\n")
    with pytest.raises(lakemerge.InputError, match="header line is not valid UTF-8"):
        lakemerge.apply_table(table(tmp_path, "header"), spark=spark)


def test_debezium_lines_and_kafka_message_values_that_are_not_utf8(spark: Any, tmp_path: Path) -> None:
    """Debezium events are read as lines (a file) or message values (Kafka): their bytes are checked
    before any JSON is parsed, so a Latin-1 byte is a bad event, never a value holding U+FFFD."""
    good = b'{"before": null, "after": {"id": 1, "name": "ok"}, "op": "c", "source": {"lsn": 1}}'
    bad = b'{"before": null, "after": {"id": 2, "name": "caf\xe9"}, "op": "c", "source": {"lsn": 2}}'
    land(tmp_path, "e.json", good + b"\n" + bad + b"\n")
    feed = lakemerge.FeedConfig(location=(str(tmp_path / "in"),), format="debezium")
    cdc = lakemerge.TableConfig(
        name="cdc", path=str(tmp_path / "cdc"), key=("id",), sequence=("__source_lsn",), max_bad_rows=5, feed=feed
    )
    assert lakemerge.apply_table(cdc, spark=spark).metrics.rows_bad == 1
    [event] = lakemerge.quarantine(cdc, spark=spark)
    at = bad.index(b"\xe9") + 1
    assert event.row == 2 and event.reason.startswith(f"invalid UTF-8: byte E9 at byte {at} of the line")
    assert read_table(cdc.path, ["id", "name"]) == [{"id": 1, "name": "ok"}]

    messages = [("orders", 0, 7, good), ("orders", 0, 8, bad)]
    kafka = spark.createDataFrame(messages, "topic STRING, partition INT, offset BIGINT, value BINARY")
    rules = lakemerge.RecordsConfig(format="debezium")
    framed = cdc.model_copy(update={"name": "framed", "path": str(tmp_path / "framed"), "feed": None, "records": rules})
    with pytest.raises(lakemerge.InputError) as raised:
        lakemerge.apply_changes(framed.model_copy(update={"max_bad_rows": 0}), kafka, source="k", batch_id=1)
    assert f"topic orders, partition 0, offset 8: invalid UTF-8: byte E9 at byte {at} of the message's value" in str(
        raised.value
    )
    as_json = lakemerge.RecordsConfig(format="json", schema="id INT, name STRING")
    rows = [("orders", 1, 3, b'{"id": 1, "name": "ok"}'), ("orders", 1, 4, b'{"id": 2, "name": "caf\xe9"}')]
    plain = framed.model_copy(
        update={"name": "plain", "path": str(tmp_path / "plain"), "records": as_json, "sequence": ()}
    )
    values = spark.createDataFrame(rows, "topic STRING, partition INT, offset BIGINT, value BINARY")
    assert lakemerge.apply_changes(plain, values, source="k", batch_id=1).metrics.rows_bad == 1
    [record] = lakemerge.quarantine(plain, spark=spark)
    at = rows[1][3].index(b"\xe9") + 1
    assert (record.row, record.reason) == (
        4,
        f"invalid UTF-8: byte E9 at byte {at} of the message's value cannot be decoded",
    )
    assert record.record == '{"id": 2, "name": "caf\ufffd"}'
    assert read_table(plain.path, ["id", "name"]) == [{"id": 1, "name": "ok"}]
