"""Apply: decide what each collapsed change does to the table, then write it in one commit."""

from __future__ import annotations

from lakemerge.write.classify import Outcome, classify
from lakemerge.write.merge import write_changes

__all__ = ["Outcome", "classify", "write_changes"]
