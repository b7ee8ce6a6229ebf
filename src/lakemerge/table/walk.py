"""The ledger's content, and the walk of a table's history that builds it, commit by commit, in
version order (:func:`lakemerge.table.ledger.ledger` walks; :mod:`lakemerge.table.saved_walks`
keeps a walk beside the table in its JSON form)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lakemerge.results import AppliedFile
from lakemerge.table.offsets import Ends, ends_from_record, ends_of_record, ends_record, furthest


def parse_record(user_metadata: str | None) -> dict[str, Any] | None:
    """The lakemerge record in a commit's userMetadata, or ``None`` for other commits."""
    if not user_metadata:
        return None
    try:
        record = json.loads(user_metadata)
    except ValueError:
        return None
    if not isinstance(record, dict) or "lakemerge" not in record:
        return None
    return record


@dataclass
class Ledger:
    """What the table's history says lakemerge committed (docs/semantics.md §8 Atomicity and exactly once).

    Attributes:
        files: every file recorded by a committed batch: path → (file as applied, version).
        batch_ids: the ids of the batches whose commits the table's content still holds.
        snapshots: per feed index, the position of the last full snapshot applied (docs/semantics.md §5).
        sources: per source of batches given as DataFrames, the greatest batch id committed from it
            (its batches up to that one are applied: ``lakemerge.apply_changes``).
        offsets: per source of Kafka records (a stream), one past the last offset its commits
            applied in each topic's partition (:mod:`lakemerge.table.offsets`).
        last_batch: the greatest batch number a record in the history carries (rolled-back
            batches included: Delta's transaction state keeps their numbers too), or ``None``
            when the history holds no batch record (a new table, or log cleanup removed them all).
    """

    files: dict[str, tuple[AppliedFile, int]] = field(default_factory=dict)
    batch_ids: set[str] = field(default_factory=set)
    snapshots: dict[int, list[Any]] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)
    last_batch: int | None = None
    offsets: dict[str, Ends] = field(default_factory=dict)


@dataclass
class Walk:
    """The ledger walk's state after the commits up to ``version`` (-1: none), in version order."""

    table_id: str
    version: int = -1
    files: dict[str, tuple[AppliedFile, int]] = field(default_factory=dict)
    batches: dict[str, int] = field(default_factory=dict)
    snapshot_versions: dict[int, list[tuple[int, list[Any]]]] = field(default_factory=dict)
    source_versions: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    last_batch: int | None = None
    offset_versions: dict[str, list[tuple[int, Ends]]] = field(default_factory=dict)

    def copy(self) -> Walk:
        return Walk(
            table_id=self.table_id,
            version=self.version,
            files=dict(self.files),
            batches=dict(self.batches),
            snapshot_versions={feed: list(items) for feed, items in self.snapshot_versions.items()},
            source_versions={name: list(items) for name, items in self.source_versions.items()},
            last_batch=self.last_batch,
            offset_versions={name: list(items) for name, items in self.offset_versions.items()},
        )

    def to_json(self) -> dict[str, Any]:
        """The walk as JSON values (:mod:`lakemerge.table.saved_walks`)."""
        return {
            "version": self.version,
            "files": [[f.path, f.size, f.modified, v] for f, v in self.files.values()],
            "batches": self.batches,
            "snapshot_versions": {str(feed): items for feed, items in self.snapshot_versions.items()},
            "source_versions": self.source_versions,
            "last_batch": self.last_batch,
            "offset_versions": {
                name: [[v, ends_record(e)] for v, e in items] for name, items in self.offset_versions.items()
            },
        }

    @classmethod
    def from_json(cls, table_id: str, found: dict[str, Any]) -> Walk:
        """The walk :meth:`to_json` gave."""
        return cls(
            table_id=table_id,
            version=int(found["version"]),
            files={p: (AppliedFile(path=p, size=int(n), modified=int(m)), int(v)) for p, n, m, v in found["files"]},
            batches={str(i): int(v) for i, v in found["batches"].items()},
            snapshot_versions={
                int(feed): [(int(v), pos) for v, pos in items] for feed, items in found["snapshot_versions"].items()
            },
            source_versions={
                name: [(int(v), int(n)) for v, n in items] for name, items in found["source_versions"].items()
            },
            last_batch=found["last_batch"],
            offset_versions={
                name: [(int(v), ends_from_record(e)) for v, e in items]
                for name, items in found["offset_versions"].items()
            },
        )

    def add(self, row: Any) -> None:
        """Fold one history row (the next version) into the walk."""
        version = int(row["version"])
        self.version = max(self.version, version)
        record = parse_record(row["userMetadata"])
        if record is None:
            return
        rollback = record.get("rollback")
        if rollback:
            undone = int(rollback["to_version"])
            if rollback.get("reapply"):
                self.files = {p: (f, v) for p, (f, v) in self.files.items() if v <= undone}
                self.source_versions = {
                    name: [(v, n) for v, n in items if v <= undone] for name, items in self.source_versions.items()
                }
                self.offset_versions = {
                    name: [(v, e) for v, e in items if v <= undone] for name, items in self.offset_versions.items()
                }
            self.batches = {i: v for i, v in self.batches.items() if v <= undone}
            self.snapshot_versions = {
                feed: [(v, pos) for v, pos in items if v <= undone] for feed, items in self.snapshot_versions.items()
            }
        for item in record.get("files", []):
            self.files[item["path"]] = (AppliedFile(**item), version)
        if record.get("batch_id"):
            self.batches[str(record["batch_id"])] = version
            if isinstance(record.get("txn_version"), int):
                self.last_batch = max(self.last_batch or 0, record["txn_version"])
        for feed, position in (record.get("snapshots") or {}).items():
            self.snapshot_versions.setdefault(int(feed), []).append((version, position))
        source = record.get("source")
        if isinstance(source, dict) and isinstance(source.get("batch"), int):
            self.source_versions.setdefault(str(source["name"]), []).append((version, source["batch"]))
        if isinstance(source, dict) and (source.get("offsets") or source.get("ends")):
            applied = furthest(ends_of_record(source.get("offsets")), ends_from_record(source.get("ends")))
            self.offset_versions.setdefault(str(source["name"]), []).append((version, applied))

    def ledger(self) -> Ledger:
        return Ledger(
            files=dict(self.files),
            batch_ids=set(self.batches),
            snapshots={feed: items[-1][1] for feed, items in self.snapshot_versions.items() if items},
            sources={name: max(n for _, n in items) for name, items in self.source_versions.items() if items},
            last_batch=self.last_batch,
            offsets={name: furthest(*(e for _, e in items)) for name, items in self.offset_versions.items()},
        )
