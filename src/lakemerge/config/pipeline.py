"""A whole pipeline: Spark settings, the tables, and groups of tables applied together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from lakemerge.config.base import Model, absolute
from lakemerge.config.source import SourceConfig, default_state
from lakemerge.config.spark import IDENTIFIER, SparkSettings
from lakemerge.config.stream import GroupStreamConfig
from lakemerge.config.table import TableConfig


class GroupConfig(Model):
    """Tables applied together: each run applies one batch to every table of the group,
    then records the group's point, ``{table: version}``, in one commit to a small Delta table at
    ``state``. Readers time-travel each table to the last recorded point to see all of them at once.

    Attributes:
        tables: the group's tables, applied in this order.
        state: where the group's points are recorded (a Delta table).
        stream: one streaming query for the group's tables, each micro-batch a transaction over
            them (see :class:`~lakemerge.config.stream.GroupStreamConfig`).
    """

    tables: tuple[str, ...]
    state: str
    stream: GroupStreamConfig | None = None

    @field_validator("tables")
    @classmethod
    def _some_tables(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("a group needs at least one table")
        return value

    @field_validator("state")
    @classmethod
    def _absolute_state(cls, value: str) -> str:
        return absolute(value)


class PipelineConfig(Model):
    """A whole pipeline file: Spark settings, the tables, and groups of tables applied together.

    Attributes:
        spark: how lakemerge starts (or joins) Spark, laid over the user's settings file.
        tables: the Delta tables the pipeline maintains, by name (letters, digits and ``_``).
        groups: tables applied together, by name: each group run commits one batch to each of
            its tables, then records the group's point.
        sources: whole databases mirrored from Debezium, by name: each topic a table, created on
            its first event, all streamed by one query whose micro-batches are transactions over
            the tables they touch (see :class:`~lakemerge.config.source.SourceConfig`).
        source: the pipeline file the configuration was read from (set by the loader).
    """

    spark: SparkSettings = Field(default_factory=SparkSettings)
    # (sources before tables: a pipeline without tables needs a source, which the tables' check reads)
    sources: dict[str, SourceConfig] = Field(default_factory=dict)
    tables: dict[str, TableConfig] = Field(default_factory=dict, validate_default=True)
    groups: dict[str, GroupConfig] = Field(default_factory=dict)
    source: str | None = None

    @model_validator(mode="after")
    def _groups_name_tables(self) -> PipelineConfig:
        owner: dict[str, str] = {}
        for group, config in self.groups.items():
            for name in config.tables:
                if name not in self.tables:
                    raise ValueError(f"group '{group}' names table '{name}', which the pipeline does not define")
                if name in owner:
                    raise ValueError(f"table '{name}' is in both groups '{owner[name]}' and '{group}'")
                owner[name] = group
            if config.stream is not None:
                self._check_group_stream(group, config)
        return self

    def _check_group_stream(self, group: str, config: GroupConfig) -> None:
        streams = [self.tables[name].stream for name in config.tables]
        if any(s is None or s.source != "kafka" or not s.topics for s in streams):
            raise ValueError(
                f"group '{group}' streams: each of its tables needs a kafka stream section naming its topics"
            )
        cluster = {(s.bootstrap_servers, tuple(sorted(s.options.items())), s.starting_offsets) for s in streams if s}
        if len(cluster) > 1:
            raise ValueError(
                f"group '{group}' streams: its tables' streams must share bootstrap_servers, options and "
                "starting_offsets"
            )
        topics = [t for s in streams if s for t in s.topics]
        if len(topics) != len(set(topics)):
            raise ValueError(f"group '{group}' streams: a topic feeds one table only")

    def group_of(self, table: str) -> str | None:
        """The group a table belongs to, if any."""
        return next((g for g, c in self.groups.items() if table in c.tables), None)

    @model_validator(mode="before")
    @classmethod
    def _name_tables(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("sources"), dict):
            data = _source_tables(data)
        if isinstance(data, dict) and isinstance(data.get("tables"), dict):
            tables = {}
            for name, table in data["tables"].items():
                if isinstance(table, dict):
                    table = {"name": name, **table}
                tables[name] = table
            data = {**data, "tables": tables}
        return data

    @model_validator(mode="after")
    def _sources_named(self) -> PipelineConfig:
        for name in self.sources:
            if not IDENTIFIER.fullmatch(name):
                raise ValueError(f"source name {name!r} must be letters, digits and underscores")
            if name in self.groups:
                raise ValueError(f"'{name}' is both a group and a source: give them different names")
        return self

    @model_validator(mode="after")
    def _catalog_names(self) -> PipelineConfig:
        if self.spark.catalog != "hive":
            return self
        named = {
            name: t if t.catalog_name else t.model_copy(update={"catalog_name": f"{self.spark.database}.{name}"})
            for name, t in self.tables.items()
        }
        return self.model_copy(update={"tables": named})

    @field_validator("tables")
    @classmethod
    def _some_table(cls, value: dict[str, TableConfig], info: ValidationInfo) -> dict[str, TableConfig]:
        if not value and not info.data.get("sources"):
            raise ValueError("the pipeline defines no table: add a [tables.NAME] or a [sources.NAME] section")
        for name in value:
            if not IDENTIFIER.match(name):
                raise ValueError(f"table name {name!r} must be letters, digits and underscores")
        return value

    def tables_named(self, names: Sequence[str] | None) -> list[TableConfig]:
        """The tables called ``names`` (every table when ``names`` is empty), in that order.

        Raises:
            ConfigError: a name the pipeline does not define.
        """
        return [self.table(n) for n in names] if names else list(self.tables.values())

    def table(self, name: str) -> TableConfig:
        """Return the table called ``name``, or raise a ConfigError listing the known ones."""
        from lakemerge.errors import ConfigError

        try:
            return self.tables[name]
        except KeyError:
            raise ConfigError(
                f"no table named '{name}'; the pipeline has: {', '.join(sorted(self.tables))}",
                key="tables",
                source=self.source,
            ) from None


def _source_tables(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each ``[tables.NAME]`` section that names a source (``source = "..."``) moved
    into that source's ``tables``, and each source's ``state`` by default beside its tables."""
    sources: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in data["sources"].items()}
    tables: dict[str, Any] = data["tables"] if isinstance(data.get("tables"), dict) else {}
    kept = {}
    for name, table in tables.items():
        owner = table.get("source") if isinstance(table, dict) else None
        if owner is None:
            kept[name] = table
            continue
        source = sources.get(owner)
        if not isinstance(source, dict):
            raise ValueError(f"table '{name}' names source '{owner}', which the pipeline does not define")
        source["tables"] = {**(source.get("tables") or {}), name: {k: v for k, v in table.items() if k != "source"}}
    for name, source in sources.items():
        if isinstance(source, dict) and "state" not in source and isinstance(source.get("table_path"), str):
            source["state"] = default_state(source["table_path"], name)
    return {**data, "tables": kept, "sources": sources}
