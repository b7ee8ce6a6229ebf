"""A table's change stream: the ``stream`` section of a table, read by ``lakemerge stream``.

Each micro-batch of a Structured Streaming query is one batch of the table (``lakemerge.apply_changes``),
committed exactly once across crashes, restarts and lost checkpoints: a Kafka micro-batch by its
records' offsets, which the table's commits record (docs/semantics.md §8).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from lakemerge.config.base import Model, absolute
from lakemerge.config.records import RecordsConfig, debezium_defaults

StreamSource = Literal["kafka", "files"]

_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|seconds?|m|minutes?|h|hours?)\s*$")
_UNITS = {
    "ms": 0.001,
    "millisecond": 0.001,
    "s": 1.0,
    "second": 1.0,
    "m": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
}


def checkpoint(value: str) -> str:
    """A checkpoint folder, made absolute."""
    if not value.strip():
        raise ValueError("must not be empty")
    return absolute(value)


def trigger(value: str) -> str:
    """``available_now`` or an interval (``30 seconds``, ``500 ms``, ``1 minute``)."""
    if value != "available_now" and not _INTERVAL.match(value):
        raise ValueError(f"'{value}' is neither 'available_now' nor an interval such as '30 seconds' or '500 ms'")
    return value


def interval_seconds(value: str) -> float | None:
    """The interval of a trigger in seconds (``None`` for ``available_now``)."""
    found = _INTERVAL.match(value)
    if found is None:
        return None
    unit = found.group(2)
    return float(found.group(1)) * _UNITS[unit if unit in ("ms", "s") else unit.removesuffix("s")]


class StreamConfig(RecordsConfig):
    """Where a table's stream of changes comes from, and how often it is applied.

    Attributes:
        source: ``kafka`` (a topic of change events, e.g. Debezium's) or ``files`` (the table's
            feeds' landing zones as a streaming file source: each micro-batch is the files that
            arrived, applied as a file batch).
        format: with ``kafka``: ``debezium`` (events as Debezium's JSON converter writes them, with
            or without their schema) or ``json`` (one JSON object per message, typed by
            ``schema``); the record rules (op column and codes) apply to what they decode into.
        bootstrap_servers / topics / topic_pattern: the Kafka cluster and what to subscribe to.
        starting_offsets: where a new stream starts: ``earliest``, ``latest`` or Spark's JSON of
            offsets per partition. A stream with a checkpoint resumes where it stopped; one whose
            tables record offsets it applied, where they end (:mod:`lakemerge.streams.resume`).
        options: passed as they are to Spark's Kafka source (``kafka.security.protocol``,
            ``kafka.sasl.jaas.config``, ``failOnDataLoss``, ...).
        max_records_per_batch: the most Kafka records (or files, for ``files``) one micro-batch
            takes; unset: everything available.
        checkpoint: the query's checkpoint folder (relative paths are relative to the pipeline
            file). It holds the offsets each micro-batch read: a restarted stream replays the
            micro-batch in progress, which lakemerge applies exactly once (a lost checkpoint loses
            nothing either: the tables' commits record the offsets applied).
        trigger: ``available_now`` (everything available, then stop: for schedulers) or an
            interval (``30 seconds``, ``500 ms``, ``1 minute``) between micro-batches.
        name: the query's name and the source name recorded with each batch (default: the
            table's name, ``stream:<table>``).
    """

    source: StreamSource = "kafka"
    bootstrap_servers: str | None = None
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: str = "earliest"
    options: dict[str, str] = Field(default_factory=dict)
    max_records_per_batch: int | None = Field(default=None, ge=1)
    checkpoint: str
    trigger: str = "available_now"
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _debezium_by_default(cls, data: object) -> object:
        """A stream of Debezium events unless it says otherwise (Debezium's defaults then apply)."""
        if isinstance(data, dict) and data.get("source", "kafka") == "kafka" and "format" not in data:
            data = {**data, "format": "debezium"}
        return debezium_defaults(data)

    @field_validator("topics", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("checkpoint")
    @classmethod
    def _absolute_checkpoint(cls, value: str) -> str:
        return checkpoint(value)

    @field_validator("trigger")
    @classmethod
    def _known_trigger(cls, value: str) -> str:
        return trigger(value)

    @field_validator("options", mode="before")
    @classmethod
    def _stringify(cls, value: object) -> object:
        if isinstance(value, dict):
            return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _source_settings(self) -> StreamConfig:
        if self.source == "kafka":
            if not self.bootstrap_servers:
                raise ValueError("a kafka stream needs bootstrap_servers")
            if bool(self.topics) == bool(self.topic_pattern):
                raise ValueError("a kafka stream needs topics or topic_pattern (one of them)")
            if self.format == "rows":
                raise ValueError("a kafka stream's format is 'debezium' or 'json'")
            if self.format == "json" and not self.schema_ddl:
                raise ValueError("format = 'json' needs schema (the messages' columns and types)")
        elif self.topics or self.topic_pattern or self.bootstrap_servers or self.message_key != "ignore":
            raise ValueError("topics, topic_pattern, bootstrap_servers and message_key are for source = 'kafka'")
        return self

    @property
    def interval_seconds(self) -> float | None:
        """The trigger's interval in seconds (``None`` for ``available_now``)."""
        return interval_seconds(self.trigger)


class GroupStreamConfig(Model):
    """One streaming query for the tables of a group (``[groups.NAME.stream]``): each micro-batch is
    a transaction over them (``lakemerge.transaction``), its id one more than the group's last, so
    that readers of the group's point see every table of a micro-batch or none; the point records
    the Kafka offsets the transactions applied (docs/semantics.md §8). The group's tables
    each have a Kafka ``stream`` section naming their topics and giving their record rules (on one
    Kafka cluster, with the same options); they are not streamed one by one.

    Attributes:
        checkpoint / trigger / max_records_per_batch / name: as a table's stream (``name`` by
            default ``stream:<group>``).
    """

    checkpoint: str
    trigger: str = "available_now"
    max_records_per_batch: int | None = Field(default=None, ge=1)
    name: str | None = None

    @field_validator("checkpoint")
    @classmethod
    def _absolute_checkpoint(cls, value: str) -> str:
        return checkpoint(value)

    @field_validator("trigger")
    @classmethod
    def _known_trigger(cls, value: str) -> str:
        return trigger(value)

    @property
    def interval_seconds(self) -> float | None:
        """The trigger's interval in seconds (``None`` for ``available_now``)."""
        return interval_seconds(self.trigger)
