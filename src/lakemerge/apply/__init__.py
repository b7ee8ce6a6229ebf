"""Apply: decide what each collapsed change does to the table, then write it in one commit."""

from __future__ import annotations

from lakemerge.apply.classify import Outcome, classify
from lakemerge.apply.merge import write_changes

__all__ = ["Outcome", "classify", "write_changes"]
