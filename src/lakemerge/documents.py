"""What each command prints as one document: its results gathered (``--json`` prints
:meth:`~lakemerge.results.Result.to_dict` of these; the text output shows the same)."""

from __future__ import annotations

from dataclasses import dataclass

from lakemerge.results import (
    BatchResult,
    CommitInfo,
    CompactionResult,
    GroupPoint,
    QuarantinedRow,
    Registered,
    Result,
    VacuumResult,
)


@dataclass(frozen=True)
class Batches(Result):
    """The batches one command applied (``apply``, ``run``), in commit order."""

    batches: tuple[BatchResult, ...]


@dataclass(frozen=True)
class History(Result):
    """A table's commits, newest first (``history``)."""

    table: str
    commits: tuple[CommitInfo, ...]


@dataclass(frozen=True)
class Quarantine(Result):
    """A table's quarantined records (``quarantine``): the table, where its quarantine is, the rows."""

    table: str
    quarantine: str
    rows: tuple[QuarantinedRow, ...]


@dataclass(frozen=True)
class GroupPoints(Result):
    """Each group's last consistent point (``snapshot``); ``None`` before its first complete run."""

    groups: dict[str, GroupPoint | None]


@dataclass(frozen=True)
class Compactions(Result):
    """What ``compact`` did to each table."""

    tables: tuple[CompactionResult, ...]


@dataclass(frozen=True)
class Vacuums(Result):
    """What ``vacuum`` did to each table."""

    tables: tuple[VacuumResult, ...]


@dataclass(frozen=True)
class Registrations(Result):
    """What ``register`` put in the Spark catalog, per table."""

    tables: tuple[Registered, ...]


@dataclass(frozen=True)
class SparkConf(Result):
    """The Spark settings lakemerge starts a session with (``conf``): the master and every setting."""

    master: str
    conf: dict[str, str]
