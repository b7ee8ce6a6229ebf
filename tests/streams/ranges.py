"""The Kafka offsets a stream's commits record, read back with delta-rs from each commit's record:
every offset sent applied by exactly one commit; and the JSON stream settings the Kafka tests share."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import deltalake

Partition = tuple[str, int]


def applied_ranges(path: str | Path) -> dict[Partition, list[tuple[int, int]]]:
    """Per topic and partition, the offset ranges (first, one past the last) the table's commits
    record, in offset order."""
    found: dict[Partition, list[tuple[int, int]]] = {}
    for commit in deltalake.DeltaTable(str(path)).history():
        record = json.loads(commit.get("userMetadata") or "{}")
        for topic, partitions in ((record.get("source") or {}).get("offsets") or {}).items():
            for partition, (first, end) in partitions.items():
                found.setdefault((topic, int(partition)), []).append((int(first), int(end)))
    return {p: sorted(spans) for p, spans in found.items()}


def sent_counts(topic: str, partitions: Iterable[int]) -> dict[Partition, int]:
    """How many messages went to each partition of ``topic`` (a topic of its own, offsets from 0)."""
    return {(topic, p): n for p, n in Counter(partitions).items()}


def assert_each_offset_applied_once(path: str | Path, sent: dict[Partition, int]) -> None:
    """The table's commits cover every offset sent, each once: per partition, ranges that follow
    each other from 0 to the number of messages sent, none overlapping."""
    ranges = applied_ranges(path)
    assert set(ranges) == set(sent), f"partitions applied {sorted(ranges)}, sent {sorted(sent)}"
    for partition, count in sent.items():
        spans = ranges[partition]
        assert spans[0][0] == 0 and spans[-1][1] == count, (partition, spans, count)
        for (_, end), (first, _) in itertools.pairwise(spans):
            assert end == first, f"{partition}: ranges {spans} overlap or leave a gap"


def table_stream(root: Path, bootstrap: str, name: str, **stream: Any) -> dict[str, Any]:
    """A ``[tables.NAME.stream]`` of JSON change records of ``id, seq, op, v`` from topic ``name``."""
    return {
        "bootstrap_servers": bootstrap,
        "topics": [name],
        "format": "json",
        "schema": "id INT, seq BIGINT, op STRING, v STRING",
        "op_column": "op",
        "upsert_codes": ["I", "U"],
        "checkpoint": str(root / "checkpoint"),
        **stream,
    }
