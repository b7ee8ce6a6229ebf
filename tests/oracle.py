"""A plain-Python reference of docs/semantics.md §1-§4 and §12, sharing no code with lakemerge.

A table is a dict from key to row (a dict holding the sequence too). A batch is a list of files,
each a list of change rows in file order; files are taken in the order given (the test sorts them
as lakemerge's file order does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]


@dataclass
class Counts:
    rows_read: int = 0
    changes: int = 0
    superseded: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    late: int = 0
    deletes_absent: int = 0
    truncates: int = 0
    truncated: int = 0
    ignored: int = 0
    unchanged: int = 0
    snapshot_absent: int = 0
    tombstones_written: int = 0


@dataclass
class Oracle:
    key: Sequence[str]
    seq: str
    op: str
    partial: Sequence[str] = ()
    table: dict[tuple[Any, ...], Row] = field(default_factory=dict)
    # Tombstones (docs/semantics.md §12): each deleted key's greatest delete sequence, and the
    # greatest truncate; a change for a key not in the table older than either is late.
    tombstones: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    truncated_at: Any = None

    def apply(self, files: Sequence[Sequence[Row]]) -> Counts:
        counts = Counts()
        ordered: list[tuple[Any, int, int, Row]] = []
        for f, rows in enumerate(files):
            for r, row in enumerate(rows):
                counts.rows_read += 1
                ordered.append((row[self.seq], f, r, row))
        truncates = [o for o in ordered if o[3][self.op] == "T"]
        cut = max((o[0] for o in truncates), default=None)
        counts.truncates = len(truncates)
        forgotten_before = self.truncated_at
        if cut is not None:
            counts.tombstones_written += 1
            self.truncated_at = cut if self.truncated_at is None else max(cut, self.truncated_at)
            before = len(self.table)
            self.table = {k: v for k, v in self.table.items() if v[self.seq] >= cut}
            counts.truncated = before - len(self.table)
        by_key: dict[tuple[Any, ...], list[tuple[Any, int, int, Row]]] = {}
        for item in ordered:
            row = item[3]
            if row[self.op] == "T" or (cut is not None and item[0] < cut):
                continue
            by_key.setdefault(tuple(row[k] for k in self.key), []).append(item)
        for key, items in by_key.items():
            items.sort(key=lambda i: (i[0], i[1], i[2]))
            latest = dict(items[-1][3])
            after_delete = any(i[3][self.op] == "D" for i in items[:-1])
            if self.partial and latest[self.op] != "D":
                last_delete = max((n for n, i in enumerate(items) if i[3][self.op] == "D"), default=-1)
                for column in self.partial:
                    values = [i[3][column] for i in items[last_delete + 1 :] if i[3][column] is not None]
                    latest[column] = values[-1] if values else None
            counts.changes += 1
            stored = self.table.get(key)
            if stored is not None and latest[self.seq] < stored[self.seq]:
                counts.late += 1
                continue
            if stored is None and (
                (key in self.tombstones and latest[self.seq] < self.tombstones[key])
                or (forgotten_before is not None and latest[self.seq] < forgotten_before)
            ):
                counts.late += 1
                continue
            if latest[self.op] == "D":
                if stored is None:
                    counts.deletes_absent += 1
                else:
                    counts.deleted += 1
                    del self.table[key]
                counts.tombstones_written += 1
                self.tombstones[key] = max(latest[self.seq], self.tombstones.get(key, latest[self.seq]))
                continue
            row = {k: v for k, v in latest.items() if k != self.op}
            if stored is None:
                counts.inserted += 1
            else:
                counts.updated += 1
                if self.partial and not after_delete:
                    for column in self.partial:
                        if row[column] is None:
                            row[column] = stored[column]
            self.table[key] = row
        counts.superseded = counts.rows_read - counts.truncates - counts.changes
        return counts

    def rows(self) -> list[Row]:
        return sorted(self.table.values(), key=lambda r: [str(r[k]) for k in sorted(r)])


# ---------------------------------------------------------------------------------------------
# A second, functional reference used by tests/semantics/test_properties_oracle.py: semantics 1, 2 and 8
# for upserts and deletes only (no tombstones, no partial updates, no truncates). Written from
# docs/semantics.md alone; it shares nothing with the Oracle class above nor with lakemerge.
# ---------------------------------------------------------------------------------------------

UPSERT_CODES = frozenset({"I", "U"})
DELETE_CODES = frozenset({"D"})
COUNT_NAMES = (
    "rows_read",
    "changes",
    "superseded",
    "inserted",
    "updated",
    "deleted",
    "late",
    "deletes_absent",
    "tombstones_written",
)

Key = tuple[Any, ...]
State = dict[Key, Row]


def apply_batch(
    state: State,
    files: Sequence[tuple[str, Sequence[Row]]],
    *,
    key: Sequence[str] = ("k1", "k2"),
    seq: str = "seq",
    op: str = "op",
    tombstones: dict[Key, Any] | None = None,
) -> tuple[State, dict[str, int]]:
    """Fold one batch into `state`; return the new state (the input is not modified) and counts.

    `tombstones` (updated in place) maps each deleted key to its greatest delete sequence: a change
    for a key the state lacks that is older than its tombstone is late (docs/semantics.md §12).

    `files` are (file name or full path, rows in file order). File order is lexicographic by the
    name/path given, whatever order the list is in. Within the batch each key keeps one change:
    the greatest sequence, ties to the later file, then to the later row of the file. Against the
    stored row: an older sequence is late (ignored); an equal or newer one wins. Upserts insert or
    update; deletes remove the key (or count as a delete of an absent key). The op column is not
    stored.
    """
    counts = dict.fromkeys(COUNT_NAMES, 0)
    winners: dict[Key, tuple[tuple[Any, int, int], Row]] = {}
    for file_rank, (_name, rows) in enumerate(sorted(files, key=lambda f: f[0])):
        for position, row in enumerate(rows):
            counts["rows_read"] += 1
            if row[op] not in UPSERT_CODES | DELETE_CODES:
                raise ValueError(f"unknown op code {row[op]!r}")
            k = tuple(row[c] for c in key)
            rank = (row[seq], file_rank, position)
            if k not in winners or rank > winners[k][0]:
                winners[k] = (rank, row)
    counts["changes"] = len(winners)
    counts["superseded"] = counts["rows_read"] - counts["changes"]

    graves = {} if tombstones is None else tombstones
    new_state: State = {k: dict(v) for k, v in state.items()}
    for k, (_rank, change) in winners.items():
        stored = new_state.get(k)
        older = stored[seq] if stored is not None else graves.get(k)
        if older is not None and change[seq] < older:
            counts["late"] += 1
        elif change[op] in DELETE_CODES:
            if stored is None:
                counts["deletes_absent"] += 1
            else:
                counts["deleted"] += 1
                del new_state[k]
            counts["tombstones_written"] += 1
            graves[k] = max(graves.get(k, change[seq]), change[seq])
        else:
            counts["inserted" if stored is None else "updated"] += 1
            new_state[k] = {c: v for c, v in change.items() if c != op}
    return new_state, counts


def state_rows(state: State, columns: Sequence[str]) -> list[Row]:
    """The state's rows restricted to `columns`, in a canonical order (None sorts first)."""
    return sort_rows([{c: r.get(c) for c in columns} for r in state.values()], columns)


def sort_rows(rows: Sequence[Row], columns: Sequence[str]) -> list[Row]:
    return sorted(rows, key=lambda r: [(r[c] is not None, str(r[c])) for c in columns])
