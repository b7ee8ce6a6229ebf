"""What a Debezium event's schema says of each table column: its Kafka Connect type, its semantic
(logical) type's name and parameters.

The JSON converter with ``schemas.enable=true`` puts the schema beside the payload
(``{"schema": {...}, "payload": {...}}``): a ``struct`` whose ``before`` and ``after`` fields are
the table's row, one entry per column: ``{"field": "balance", "type": "bytes", "name":
"org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2", ...}}``. The Avro converter
writes the same schema as Avro: each column's type carries ``connect.name`` and
``connect.parameters`` (and, for decimals, Avro's ``decimal`` logical type). Kafka Connect's S3
and HDFS sinks keep that Avro schema in their Avro files' header and, in Parquet files, in the
footer's ``parquet.avro.schema``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"


@dataclass(frozen=True)
class Logical:
    """A column's type as Kafka Connect describes it.

    Attributes:
        name: the semantic type (``io.debezium.time.MicroTimestamp``), or ``None`` for a plain one.
        type: the Connect type (``int64``, ``bytes``, ``struct``, ...), lower case.
        parameters: the schema's parameters (``scale``, ``connect.decimal.precision``, ...).
    """

    name: str | None
    type: str
    parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def short(self) -> str:
        """The semantic type's last part (``MicroTimestamp``), or the Connect type."""
        return (self.name or self.type).rsplit(".", 1)[-1]

    def number(self, key: str) -> int | None:
        """The integer parameter ``key``, if given."""
        text = self.parameters.get(key)
        try:
            return int(text) if text is not None else None
        except ValueError:
            return None


def from_connect(schemas: Iterable[str]) -> dict[str, Logical]:
    """Each column's type, from the JSON texts of envelope schemas (``{"type": "struct", "fields":
    [{"field": "before", ...}, {"field": "after", ...}, ...]}``). Where schemas differ (the table
    changed), a decimal's scale and precision are the largest found."""
    found: dict[str, Logical] = {}
    for text in schemas:
        try:
            envelope = json.loads(text)
        except (TypeError, ValueError):
            continue
        for part in _fields(envelope):
            if part.get("field") not in ("before", "after"):
                continue
            for column in _fields(part):
                name = column.get("field")
                if isinstance(name, str):
                    parameters = column.get("parameters") or {}
                    logical = Logical(
                        name=column.get("name") if isinstance(column.get("name"), str) else None,
                        type=str(column.get("type", "")).lower(),
                        parameters={str(k): str(v) for k, v in parameters.items()},
                    )
                    found[name] = _wider(found.get(name), logical)
    return found


def sometimes_absent(schemas: Iterable[str]) -> tuple[str, ...]:
    """The columns some of the envelope schemas (JSON texts) have and others lack: the table
    gained or lost them between the events."""
    found: list[set[str]] = []
    for text in schemas:
        try:
            envelope = json.loads(text)
        except (TypeError, ValueError):
            continue
        row = next((p for p in _fields(envelope) if p.get("field") == "after"), None)
        if row is not None:
            found.append({str(c["field"]) for c in _fields(row) if isinstance(c.get("field"), str)})
    if len(found) < 2:
        return ()
    every, some = set.intersection(*found), set.union(*found)
    return tuple(sorted(some - every))


def from_avro(schema: str) -> dict[str, Logical]:
    """Each column's type, from an Avro schema of Debezium's envelope as the Avro converter writes
    it (a record with ``before`` and ``after`` fields, each a union of ``null`` and the row's
    record)."""
    try:
        envelope = json.loads(schema)
    except (TypeError, ValueError):
        return {}
    found: dict[str, Logical] = {}
    for part in _fields(envelope):
        if part.get("name") not in ("before", "after"):
            continue
        record = _non_null(part.get("type"))
        for column in _fields(record) if isinstance(record, dict) else []:
            kind = _non_null(column.get("type"))
            if isinstance(column.get("name"), str):
                found[column["name"]] = _wider(found.get(column["name"]), _avro_logical(kind))
    return found


def _avro_logical(kind: Any) -> Logical:
    if not isinstance(kind, dict):
        return Logical(None, str(kind).lower())
    parameters = {str(k): str(v) for k, v in (kind.get("connect.parameters") or {}).items()}
    name = kind.get("connect.name")
    if kind.get("logicalType") == "decimal":
        name = name or DECIMAL
        parameters.setdefault("scale", str(kind.get("scale", 0)))
        if "precision" in kind:
            parameters.setdefault("connect.decimal.precision", str(kind["precision"]))
    avro_type = str(kind.get("type", "")).lower()
    connect = {"long": "int64", "int": "int32", "record": "struct"}.get(avro_type, avro_type)
    return Logical(name if isinstance(name, str) else None, connect, parameters)


def _wider(old: Logical | None, new: Logical) -> Logical:
    if old is None or old.name != new.name or new.name != DECIMAL:
        return new
    merged = dict(new.parameters)
    for key in ("scale", "connect.decimal.precision"):
        values = [v for v in (old.number(key), new.number(key)) if v is not None]
        if values:
            merged[key] = str(max(values))
    return Logical(new.name, new.type, merged)


def _fields(node: Any) -> list[dict[str, Any]]:
    fields = node.get("fields") if isinstance(node, dict) else None
    return [f for f in fields if isinstance(f, dict)] if isinstance(fields, list) else []


def _non_null(kind: Any) -> Any:
    """The branch of an Avro union that is not ``null``."""
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        return rest[0] if rest else "null"
    return kind
