"""A plain-Python reference of SCD type 2 history, tombstones and full snapshots, written from
docs/history.md alone (it shares no code with lakemerge, nor with tests/oracle.py).

A table is, per key, a list of versions (dicts holding the columns plus ``__start_at`` and
``__end_at``) and a set of tombstone sequences. A batch is a list of files in file order, each a
list of change rows (``op`` = ``U`` or ``D``), plus optionally one snapshot (a list of rows) that
sorts after the change files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]
Key = tuple[Any, ...]

INCOMING, STORED_UPSERT, STORED_DELETE = 2, 1, 0


@dataclass
class Event:
    at: Any
    op: str
    values: Row
    origin: int
    snapshot: bool = False


@dataclass
class HistoryOracle:
    key: Sequence[str]
    seq: str
    columns: Sequence[str]  # every data column but key and sequence
    track: Sequence[str] = ()  # default: all of `columns`
    partial: Sequence[str] = ()
    versions: dict[Key, list[Row]] = field(default_factory=dict)
    graves: dict[Key, set[Any]] = field(default_factory=dict)

    def apply(self, files: Sequence[Sequence[Row]], snapshot: Sequence[Row] | None = None) -> dict[str, int]:
        counts = {n: 0 for n in ("rows_read", "changes", "superseded", "inserted", "updated", "deleted")}
        counts.update(late=0, deletes_absent=0, unchanged=0, snapshot_absent=0, tombstones_written=0)
        tagged: list[tuple[int, int, Row, bool]] = []
        for f, rows in enumerate(files):
            for r, row in enumerate(rows):
                tagged.append((f, r, row, False))
        if snapshot is not None:
            for r, row in enumerate(snapshot):
                tagged.append((len(files), r, {**row, "op": "U"}, True))
        counts["rows_read"] = len(tagged)
        if snapshot:
            as_of = max(row[self.seq] for row in snapshot)
            present = {self._key(row) for row in snapshot}
            held = {k for k, vs in self.versions.items() if any(v["__end_at"] is None for v in vs)}
            others = {self._key(row) for f, r, row, snap in tagged if not snap}
            for k in sorted(held | others, key=str):
                if k in present:
                    continue
                counts["snapshot_absent"] += 1
                gone = dict(zip(self.key, k, strict=True)) | {self.seq: as_of, "op": "D"}
                tagged.append((-1, 0, gone, False))
        # Duplicates of a key and sequence: the latest in file order, then row, wins.
        slots: dict[tuple[Key, Any], tuple[int, int, Row, bool]] = {}
        for item in tagged:
            f, r, row, snap = item
            slot = (self._key(row), row[self.seq])
            if slot not in slots or (f, r) > slots[slot][:2]:
                slots[slot] = item
        by_key: dict[Key, list[Event]] = {}
        for (k, at), (_f, _r, row, snap) in slots.items():
            values = {c: row.get(c) for c in self.columns}
            by_key.setdefault(k, []).append(Event(at, row["op"], values, INCOMING, snap))
        counts["changes"] = len(slots)
        for k, incoming in by_key.items():
            self._rebuild(k, incoming, counts)
        counts["superseded"] = counts["rows_read"] + counts["snapshot_absent"] - counts["changes"]
        return counts

    def _key(self, row: Row) -> Key:
        return tuple(row[c] for c in self.key)

    def _rebuild(self, k: Key, incoming: list[Event], counts: dict[str, int]) -> None:
        stored = self.versions.get(k, [])
        current = [v for v in stored if v["__end_at"] is None]
        if len(incoming) == 1 and incoming[0].snapshot and current and incoming[0].op == "U":
            v = current[0]
            same = all(v[c] == incoming[0].values[c] for c in self.columns) and v[self.seq] == incoming[0].at
            if same and incoming[0].at >= v["__start_at"]:
                counts["unchanged"] += 1  # a change read that writes nothing
                return
        timeline: dict[Any, Event] = {}

        def put(event: Event) -> None:
            if event.at not in timeline or event.origin > timeline[event.at].origin:
                timeline[event.at] = event

        starts = {v["__start_at"] for v in stored}
        points: list[Any] = []
        for v in stored:
            values = {c: v[c] for c in self.columns}
            put(Event(v["__start_at"], "U", values, STORED_UPSERT))
            points.append(v["__start_at"])
            if v[self.seq] > v["__start_at"]:
                put(Event(v[self.seq], "U", values, STORED_UPSERT))
                points.append(v[self.seq])
            if v["__end_at"] is not None:
                points.append(v["__end_at"])
                if v["__end_at"] not in starts:
                    put(Event(v["__end_at"], "D", {}, STORED_DELETE))
        for at in self.graves.get(k, set()):
            put(Event(at, "D", {}, STORED_DELETE))
            points.append(at)
        for event in incoming:
            put(event)
        newest = max(points) if points else None

        versions: list[Row] = []
        open_version: Row | None = None
        previous: Event | None = None
        epoch_values: Row | None = None  # the previous upsert's (filled) values since the last delete
        for at in sorted(timeline):
            event = timeline[at]
            if event.origin == INCOMING:
                if newest is not None and at < newest:
                    counts["late"] += 1
                elif event.op == "D":
                    counts["deleted" if previous is not None and previous.op == "U" else "deletes_absent"] += 1
                else:
                    counts["updated" if previous is not None and previous.op == "U" else "inserted"] += 1
                if event.op == "D":
                    counts["tombstones_written"] += 1
                    self.graves.setdefault(k, set()).add(at)
            if event.op == "D":
                if open_version is not None:
                    open_version["__end_at"] = at
                    open_version = None
                epoch_values = None
                previous = event
                continue
            values = dict(event.values)
            if event.origin == INCOMING:
                for c in self.partial:
                    if values[c] is None and epoch_values is not None:
                        values[c] = epoch_values[c]
            tracked = list(self.track) or list(self.columns)
            if open_version is None or any(open_version[c] != values[c] for c in tracked):
                if open_version is not None:
                    open_version["__end_at"] = at
                open_version = {**dict(zip(self.key, k, strict=True)), **values, self.seq: at}
                open_version.update(__start_at=at, __end_at=None)
                versions.append(open_version)
            else:
                open_version.update(values)
                open_version[self.seq] = at
            epoch_values = values
            previous = event
        self.versions[k] = versions

    def rows(self) -> list[Row]:
        out = []
        for vs in self.versions.values():
            for v in vs:
                out.append({**v, "__current": v["__end_at"] is None})
        return out
