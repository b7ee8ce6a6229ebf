"""Changes: type and validate change records, then collapse them to one change per key."""

from __future__ import annotations

from lakemerge.changes.collapse import collapse
from lakemerge.changes.normalize import ChangeSet, normalize

__all__ = ["ChangeSet", "collapse", "normalize"]
