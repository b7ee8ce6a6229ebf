"""A whole database mirrored from Debezium: a ``[sources.NAME]`` section.

One Kafka subscription (a topic pattern, or topics) of Debezium change events, whose topics are the
tables of a database: ``<prefix>.<schema>.<table>`` as Debezium names them (``<prefix>.<database>.
<table>`` for MySQL). Each included topic is a table of the pipeline, created on its first event at
the path the ``table_path`` template gives it, its key the fields of the events' message keys, its
columns and types those of the events' values. A ``[tables.NAME]`` section with ``source = "NAME"``
sets one of those tables' settings over the source's ``defaults``.
"""

from __future__ import annotations

import re
import string
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from lakemerge.config.base import absolute
from lakemerge.config.stream import StreamConfig, interval_seconds
from lakemerge.config.table import TableConfig

#: The placeholders of the ``table_path`` and ``table_name`` templates.
PLACEHOLDERS = ("topic", "prefix", "schema", "table")

#: Table settings a source's ``defaults`` cannot give: each table has its own (or none at all).
_OWN = ("name", "path", "key", "feed", "feeds", "more_feeds", "records", "stream", "catalog_name", "source")
#: Table settings a ``[tables.NAME]`` section of a source's table cannot give: the source feeds it.
_FED = ("feed", "feeds", "more_feeds", "records", "stream")

#: A key standing in for the message keys' fields where a table's settings are checked before any
#: event is read.
_SOME_KEY = ("_lm_message_key",)


def template_fields(template: str) -> list[str]:
    """The placeholders of ``template``, each checked: one of :data:`PLACEHOLDERS`, without a format
    or conversion.

    Raises:
        ValueError: an unknown placeholder, a format or conversion, or unbalanced braces.
    """
    found = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"'{template}': {exc} (write placeholders as {{schema}}, {{table}})") from None
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in PLACEHOLDERS:
            known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
            raise ValueError(f"'{template}' has the placeholder {{{field}}}; a template knows {known}")
        if spec or conversion:
            raise ValueError(f"'{template}': {{{field}}} takes no format or conversion")
        found.append(field)
    return found


def _one_per_table(template: str, what: str) -> str:
    """``template``, checked (:func:`template_fields`) to give each table its own ``what``: it
    names ``{table}`` or ``{topic}``."""
    named = template_fields(template)
    if "table" not in named and "topic" not in named:
        raise ValueError(f"'{template}' names no {{table}} (or {{topic}}): every table would get one {what}")
    return template


def topic_parts(topic: str) -> dict[str, str] | None:
    """A Debezium table topic's parts (``prefix``, ``schema``, ``table`` and the whole ``topic``);
    ``None`` for a topic of fewer than three dot-separated parts: not a table's (Debezium's schema
    change topic ``<prefix>``, its transaction topic ``<prefix>.transaction``, its heartbeats
    ``__debezium-heartbeat.<prefix>``)."""
    parts = topic.split(".")
    if len(parts) < 3 or not all(parts[-3:]):
        return None
    return {"topic": topic, "prefix": ".".join(parts[:-2]), "schema": parts[-2], "table": parts[-1]}


def default_state(table_path: str, source: str) -> str:
    """Where a source's points are recorded by default: ``_sources/<source>`` in the folder where
    the table path template's fixed part ends (``lake/{schema}/{table}``: ``lake/_sources/<source>``)."""
    fixed = table_path.split("{", 1)[0]
    folder = fixed[: fixed.rfind("/") + 1] if "/" in fixed else ""
    return f"{folder}_sources/{source}"


class SourceConfig(StreamConfig):
    """A whole database's Debezium change events from Kafka, each included topic a table of its own
    (``[sources.NAME]``), streamed by ``lakemerge stream`` as one query: each micro-batch is split by
    topic and applied as one transaction over the tables it touches, then the source's point
    ``{table: version}`` with the Kafka offsets applied is recorded (docs/semantics.md §8).

    Attributes:
        include / exclude: regular expressions, each matching a whole ``schema.table`` (the last two
            parts of a topic's name): a topic is a table of the source when ``include`` is empty or
            one of them matches, and none of ``exclude`` does. Other topics' events are skipped.
        table_path: where each table lives: a template of ``{topic}``, ``{prefix}``, ``{schema}``
            and ``{table}`` (``lake/{schema}/{table}``; relative to the pipeline file). It names
            ``{table}`` or ``{topic}``.
        table_name: each table's name in the pipeline (commits, errors, ``[tables.NAME]``): a
            template as ``table_path``, its characters other than letters, digits and ``_`` made
            ``_``. Two topics whose tables get one name stop the stream.
        state: where the source's points are recorded (a Delta table; default: ``_sources/NAME``
            beside the tables' folder, e.g. ``lake/_sources/shop`` for ``lake/{schema}/{table}``).
        transactions: ``whole`` (default): the source's points hold the database's transactions
            whole, as Debezium's transaction metadata (``provide.transaction.metadata``) tells
            them: the events of a transaction still missing some wait in the staging table, and
            so do the events after them in their topic partitions; events without metadata apply
            as they come. ``micro-batch``: each micro-batch applies all its events, metadata or not.
        transaction_timeout: how long a transaction may wait for the rest of its events and its
            ``END`` record (an interval: ``15 minutes``, the default) before the stream stops
            naming it.
        staging: where the events that wait are kept (a Delta table; default: the state's path
            with ``_staging`` after it).
        defaults: settings of every table of the source, as a ``[tables.NAME]`` section's
            (``write_mode``, ``history``, ``sequence``, ``max_bad_rows``, ``tombstones``, ...);
            a ``[tables.NAME]`` section with ``source`` set to this source's name overrides them
            for that table.
        tables: the settings of single tables of the source, by name (set by the loader from the
            ``[tables.NAME]`` sections naming this source).
        source: ``kafka``: a source reads Kafka.
        format: ``debezium``: a source reads Debezium change events.
    """

    #: The fields of a table's stream a source does not take, each with the reason: a key of a
    #: ``[sources.NAME]`` section naming one is an error, and the manual does not list them.
    REFUSED: ClassVar[dict[str, str]] = {
        "schema_ddl": "a source's tables take their columns and types from the events' schemas",
        "types": "a source's tables take their columns and types from the events' schemas",
        "message_key": "a source reads each table's key from the message keys' schemas",
    }

    source: Literal["kafka"] = "kafka"
    format: Literal["debezium"] = "debezium"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    table_path: str
    table_name: str = "{table}"
    state: str
    transactions: Literal["whole", "micro-batch"] = "whole"
    transaction_timeout: str = "15 minutes"
    staging: str | None = None
    defaults: dict[str, Any] = Field(default_factory=dict)
    tables: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator(*REFUSED, mode="before")
    @classmethod
    def _refused(cls, value: object, info: ValidationInfo) -> object:
        assert info.field_name is not None
        raise ValueError(f"not a key of a source: {cls.REFUSED[info.field_name]}")

    @field_validator("include", "exclude", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            _compiled(pattern)
        return value

    @field_validator("table_path")
    @classmethod
    def _path_template(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return absolute(_one_per_table(value, "path"))

    @field_validator("table_name")
    @classmethod
    def _name_template(cls, value: str) -> str:
        return _one_per_table(value, "name")

    @field_validator("state", "staging")
    @classmethod
    def _absolute_state(cls, value: str | None) -> str | None:
        return absolute(value) if value is not None else None

    @field_validator("transaction_timeout")
    @classmethod
    def _interval(cls, value: str) -> str:
        if interval_seconds(value) is None:
            raise ValueError(f"'{value}' is not an interval such as '15 minutes' or '90 seconds'")
        return value

    @property
    def staging_path(self) -> str:
        """Where the source's waiting events are kept."""
        return self.staging or f"{self.state.rstrip('/')}_staging"

    @property
    def timeout_seconds(self) -> float:
        """``transaction_timeout`` in seconds."""
        found = interval_seconds(self.transaction_timeout)
        assert found is not None  # (checked when the source was configured)
        return found

    @field_validator("defaults")
    @classmethod
    def _table_defaults(cls, value: dict[str, Any]) -> dict[str, Any]:
        own = sorted(k for k in value if k in _OWN)
        if own:
            raise ValueError(f"{own} are each table's own, not defaults of a source's tables")
        _checked({**value, "name": "defaults", "path": "/defaults"})
        return value

    @model_validator(mode="after")
    def _debezium_from_kafka(self) -> SourceConfig:
        if self.topic_pattern is not None:
            _compiled(self.topic_pattern)
        for name, settings in self.tables.items():
            fed = sorted(k for k in settings if k in _FED)
            if fed:
                raise ValueError(
                    f"table '{name}' of the source: {fed} are not for a source's table (the source feeds it)"
                )
            try:
                _checked({**self.defaults, **settings, "name": name, "path": settings.get("path", "/table")})
            except ValueError as exc:
                raise ValueError(f"table '{name}' of the source ([tables.{name}]): {exc}") from None
        return self

    def includes(self, topic: str) -> bool:
        """Whether ``topic`` is a table of the source."""
        parts = topic_parts(topic)
        if parts is None:
            return False
        named = f"{parts['schema']}.{parts['table']}"
        if self.include and not any(_compiled(p).fullmatch(named) for p in self.include):
            return False
        return not any(_compiled(p).fullmatch(named) for p in self.exclude)

    def name_of(self, topic: str) -> str:
        """The pipeline name of ``topic``'s table (an included topic)."""
        parts = topic_parts(topic)
        assert parts is not None
        return re.sub(r"[^A-Za-z0-9_]", "_", self.table_name.format(**parts))

    def table(self, topic: str, key: tuple[str, ...]) -> TableConfig:
        """The table ``topic`` (an included one) is mirrored into: the source's defaults, under its
        ``[tables.NAME]`` settings, its key those settings' or else ``key`` (the message keys'
        fields), its path theirs or else the template's.

        Raises:
            ValueError: the settings do not hold for this table (a key column also its sequence...).
        """
        parts = topic_parts(topic)
        assert parts is not None
        name = self.name_of(topic)
        return self.named(name, self.tables.get(name, {}).get("path") or self.table_path.format(**parts), key)

    def named(self, name: str, path: str, key: tuple[str, ...]) -> TableConfig:
        """The source's table ``name`` at ``path`` (as the source's points record it): the
        source's defaults under its ``[tables.NAME]`` settings, its key theirs or else ``key``.

        Raises:
            ValueError: the settings do not hold for this table.
        """
        settings = {**self.defaults, **self.tables.get(name, {}), "name": name, "path": path}
        if not settings.get("key"):
            settings["key"] = key
        return table_settings(settings)

    def keyed(self, name: str) -> bool:
        """Whether the ``[tables.NAME]`` settings of table ``name`` give its key (so that its events
        need no message key)."""
        return bool(self.tables.get(name, {}).get("key"))


def _compiled(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"'{pattern}' is not a regular expression: {exc}") from None


def _checked(settings: dict[str, Any]) -> None:
    """Check a source's table settings as a table's, with a stand-in key where they give none.

    Raises:
        ValueError: one line: the first key that is wrong, and why.
    """
    table_settings({**settings, "key": settings.get("key") or _SOME_KEY})


def table_settings(settings: dict[str, Any]) -> TableConfig:
    """A table of a source from its settings.

    Raises:
        ValueError: one line: the first key that is wrong, and why.
    """
    try:
        return TableConfig.model_validate(settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown key (check its spelling and section)"
        raise ValueError(f"{where}: {message}" if where else message) from None
