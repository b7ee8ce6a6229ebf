"""The Kafka offsets a stream's commit covers, as its record holds them, and what the commits of a
source have applied so far.

A commit of a Kafka stream records, with its source's name, the offsets of the records it applied,
per topic and partition: ``{"orders": {"0": [120, 160], "2": [87, 90]}}``, each range from its
first offset to one past its last. A source applies each partition's records in offset order, so
what its commits applied is, per partition, everything below the greatest end they record (its
*end*): a record at or above it is new, one below it was applied (docs/semantics.md, exactly once
for streams). Each commit also records the ends of every partition the source applied so far
(``"ends": {"orders": {"0": 160, "1": 12, "2": 90}}``): the newest commit alone says where the
source is, also once older commits have left the table's history.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

#: A topic's partition: (topic, partition).
Partition = tuple[str, int]

#: Offsets per partition: the first and one past the last of a batch's records.
Ranges = dict[Partition, tuple[int, int]]

#: Per partition, one past the last offset applied.
Ends = dict[Partition, int]


def as_record(ranges: Mapping[Partition, tuple[int, int]]) -> dict[str, dict[str, list[int]]]:
    """``ranges`` as a commit's record holds them (topics, then partitions as text, in order)."""
    found: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), (start, end) in sorted(ranges.items()):
        found.setdefault(topic, {})[str(partition)] = [int(start), int(end)]
    return found


def from_record(value: object) -> Ranges:
    """The ranges a commit's record holds (none when it holds none, or not in this shape)."""
    found: Ranges = {}
    if not isinstance(value, dict):
        return found
    for topic, partitions in value.items():
        if not isinstance(partitions, dict):
            continue
        for partition, pair in partitions.items():
            if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) for v in pair):
                found[(str(topic), int(partition))] = (int(pair[0]), int(pair[1]))
    return found


def ends(ranges: Mapping[Partition, tuple[int, int]]) -> Ends:
    """One past the last offset of each range."""
    return {p: end for p, (_, end) in ranges.items()}


def ends_of_record(value: object) -> Ends:
    """The ends of the ranges a commit's record holds."""
    return ends(from_record(value))


def furthest(*found: Mapping[Partition, int]) -> Ends:
    """The greatest end of each partition among ``found``."""
    merged: Ends = {}
    for each in found:
        for partition, end in each.items():
            merged[partition] = max(end, merged.get(partition, end))
    return merged


def unapplied(ranges: Mapping[Partition, tuple[int, int]], applied: Mapping[Partition, int]) -> Ranges:
    """What of ``ranges`` lies at or above the ends ``applied``: the new records' ranges."""
    found: Ranges = {}
    for partition, (start, end) in ranges.items():
        first = max(start, applied.get(partition, start))
        if first < end:
            found[partition] = (first, end)
    return found


def ends_record(value: Mapping[Partition, int]) -> dict[str, dict[str, int]]:
    """Ends as a commit's record or a group's point keeps them (``{"topic": {"0": 160}}``)."""
    found: dict[str, dict[str, int]] = {}
    for (topic, partition), end in sorted(value.items()):
        found.setdefault(topic, {})[str(partition)] = int(end)
    return found


def ends_from_record(value: object) -> Ends:
    """Ends kept by :func:`ends_record` (none for a value of another shape)."""
    found: Ends = {}
    if isinstance(value, dict):
        for topic, partitions in value.items():
            if isinstance(partitions, dict):
                found.update({(str(topic), int(p)): int(e) for p, e in partitions.items() if isinstance(e, int)})
    return found


def ends_json(value: Mapping[Partition, int]) -> str:
    """Ends as JSON text (a group's point keeps them so)."""
    return json.dumps(ends_record(value), separators=(",", ":"), sort_keys=True)


def ends_from_json(text: str | None) -> Ends:
    """Ends kept by :func:`ends_json` (none for ``None`` or text of another shape)."""
    if not text:
        return {}
    try:
        value: Any = json.loads(text)
    except ValueError:
        return {}
    return ends_from_record(value)


def starting_offsets(partitions: Iterable[Partition], applied: Mapping[Partition, int]) -> str:
    """Spark's ``startingOffsets`` JSON that resumes every one of ``partitions`` at the end applied,
    and one with nothing applied at its earliest offset (``-2``), as Spark reads a partition that
    appears while a query runs."""
    found: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(set(partitions)):
        found.setdefault(topic, {})[str(partition)] = int(applied.get((topic, partition), -2))
    return json.dumps(found, separators=(",", ":"))
