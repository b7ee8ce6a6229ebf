"""A plain-Python reference of PRODUCT.md's semantics 1-4, sharing no code with lakemerge.

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


@dataclass
class Oracle:
    key: Sequence[str]
    seq: str
    op: str
    partial: Sequence[str] = ()
    table: dict[tuple[Any, ...], Row] = field(default_factory=dict)

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
        if cut is not None:
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
            if latest[self.op] == "D":
                if stored is None:
                    counts.deletes_absent += 1
                else:
                    counts.deleted += 1
                    del self.table[key]
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
