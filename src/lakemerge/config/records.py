"""What change records given as DataFrames say, and how: the ``records`` section of a table.

Files describe their records in their feed (op column, codes, types); a DataFrame handed to
``lakemerge.apply_changes``, a transaction or a stream needs the same rules without a file format.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from lakemerge.config.base import Model
from lakemerge.config.feed import DebeziumSettings

#: How records arrive: as rows (columns named as the table's, typed or cast by ``types``), as JSON
#: objects (a string column ``value``, typed by ``schema``), or as Debezium change events (a string
#: column ``value``) decoded into rows (op ``__op``, metadata ``__ts_ms``, ``__source_...``).
RecordFormat = Literal["rows", "json", "debezium"]


#: The op column and codes of records decoded from Debezium events.
DEBEZIUM_CODES = {
    "op_column": "__op",
    "upsert_codes": ("c", "u", "r"),
    "delete_codes": ("d",),
    "ignore_codes": ("tombstone",),
}


def debezium_defaults(data: object) -> object:
    """``data`` (a section's settings) with Debezium's op column and codes where it reads Debezium
    events and sets none of its own."""
    if isinstance(data, dict) and data.get("format") == "debezium":
        return {**DEBEZIUM_CODES, **{k: v for k, v in data.items() if v is not None}}
    return data


class RecordsConfig(Model):
    """How change records say what they do (docs/semantics.md §10 Operation codes).

    Attributes:
        format: ``rows`` (the default: the DataFrame's columns are the records'), ``json`` (JSON
            objects in a string column ``value``, typed by ``schema``) or ``debezium`` (Debezium
            events in ``value``, decoded into rows; op codes c/r/u are upserts and d deletes,
            tombstones ignored and counted).
        schema_ddl: the records' columns and types as a Spark DDL string (``id INT, name STRING``):
            needed where the records' types are not known before they are read (JSON values).
        types: Spark SQL types for named columns (``{ price = "int" }``), cast after reading: a
            value that does not convert is a bad record.
        op_column: the column holding the operation code; never stored in the table. Without
            one, every record is an upsert.
        delete_codes / upsert_codes / truncate_codes / ignore_codes / op_codes_ignore_case: as a
            feed's (``upsert_codes`` empty: every code that is not another kind is an upsert).
        keep_columns / drop_columns: keep only the listed columns, or all but the listed ones.
        debezium: for ``debezium`` records, the connector's encodings where the events carry no
            schema (decimal, time and binary handling modes), as a feed's.
        message_key: for ``json`` records with a ``key`` column (Kafka's message key): ``json``,
            the key is a JSON object holding the record's key columns, which fill them where the
            value lacks them (as Kafka's log compaction keys messages); ``ignore`` (the default):
            the value alone is read.
    """

    format: RecordFormat = "rows"
    schema_ddl: str | None = Field(default=None, alias="schema")
    types: dict[str, str] = Field(default_factory=dict)
    op_column: str | None = None
    delete_codes: tuple[str, ...] = ("D",)
    upsert_codes: tuple[str, ...] = ()
    truncate_codes: tuple[str, ...] = ()
    ignore_codes: tuple[str, ...] = ()
    op_codes_ignore_case: bool = False
    keep_columns: tuple[str, ...] = ()
    drop_columns: tuple[str, ...] = ()
    message_key: Literal["ignore", "json"] = "ignore"
    debezium: DebeziumSettings = Field(default_factory=DebeziumSettings)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _debezium_defaults(cls, data: object) -> object:
        return debezium_defaults(data)

    @model_validator(mode="after")
    def _codes_disjoint(self) -> RecordsConfig:
        def fold(code: str) -> str:
            return code.lower() if self.op_codes_ignore_case else code

        groups = {
            "delete_codes": self.delete_codes,
            "upsert_codes": self.upsert_codes,
            "truncate_codes": self.truncate_codes,
            "ignore_codes": self.ignore_codes,
        }
        names = list(groups)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                both = {fold(c) for c in groups[first]} & {fold(c) for c in groups[second]}
                if both:
                    raise ValueError(f"op codes {sorted(both)} are both {first} and {second}")
        if not self.delete_codes:
            raise ValueError("delete_codes needs at least one code")
        if self.keep_columns and self.drop_columns:
            raise ValueError("use keep_columns or drop_columns, not both")
        if self.truncate_codes and not self.op_column:
            raise ValueError("truncate_codes need an op_column")
        return self

    # What a file feed has and records given as DataFrames do not (normalising reads them alike).
    @property
    def delete_file_prefix(self) -> None:
        """Records given as DataFrames come from no file: none is a file of deletes."""
        return None

    @property
    def file_order(self) -> Literal["name"]:
        """Records given as DataFrames are ordered by their position (see ``lakemerge.apply_changes``)."""
        return "name"

    @property
    def columns(self) -> tuple[str, ...]:
        """Records given as DataFrames name their own columns."""
        return ()

    @property
    def header(self) -> bool:
        """Records given as DataFrames have no header line."""
        return False
