"""Small helpers for tests: write change files, read tables back with delta-rs (an independent reader)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import deltalake


def write_lines(path: Path, lines: Iterable[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def read_table(path: str | Path, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows of the Delta table's latest version, read by delta-rs, sorted for comparison."""
    rows = deltalake.DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    if columns is not None:
        rows = [{c: r.get(c) for c in columns} for r in rows]
    return sorted(rows, key=lambda r: [(v is None, str(v)) for v in r.values()])


def table_version(path: str | Path) -> int:
    return int(deltalake.DeltaTable(str(path)).version())


def table_columns(path: str | Path) -> list[str]:
    return [f.name for f in deltalake.DeltaTable(str(path)).schema().fields]
