"""Debezium change events as the PostgreSQL and MySQL connectors write them, field for field (the
connectors' "Data type mappings" and event structure), made from plain Python values: the test's
expected values are those values, never lakemerge's decoding.

A :class:`Table` lists its columns with their source database types; :meth:`Table.event` builds one
event's JSON (with or without the JSON converter's schema) and :meth:`Table.connect_schema` the
envelope's Connect schema (which :func:`avro_schema` turns into the Avro converter's schema).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def unscaled_bytes(value: decimal.Decimal, scale: int) -> bytes:
    """A decimal's unscaled value as Java's ``BigInteger.toByteArray`` writes it: big-endian two's
    complement, as few bytes as hold the sign."""
    unscaled = int(value.scaleb(scale, decimal.Context(prec=100)))
    return unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def micros(value: dt.datetime) -> int:
    delta = value.replace(tzinfo=dt.UTC) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(frozen=True)
class Modes:
    decimal: str = "precise"  # decimal.handling.mode
    time: str = "adaptive"  # time.precision.mode
    binary: str = "bytes"  # binary.handling.mode


@dataclass
class Table:
    """A source table: ``columns`` maps each column to its database type, e.g. ``"numeric(10,2)"``,
    ``"numeric"``, ``"timestamp(6)"``, ``"timestamptz"``, ``"time(6)"``, ``"date"``, ``"int"``,
    ``"bigint"``, ``"text"``, ``"boolean"``, ``"jsonb"``, ``"uuid"``, ``"bytea"``,
    ``"datetime(3)"`` (MySQL), ``"tinyint(1)"`` (MySQL's BOOLEAN)."""

    name: str
    columns: dict[str, str]
    key: tuple[str, ...] = ("id",)
    connector: str = "postgresql"
    modes: Modes = field(default_factory=Modes)

    # -- values -------------------------------------------------------------------------------------

    def field_schema(self, column: str) -> dict[str, Any]:
        """The Connect schema of one column, as the connector declares it."""
        kind = self.columns[column]
        optional = column not in self.key
        base: dict[str, Any] = {"optional": optional, "field": column}
        modes = self.modes
        if kind.startswith("numeric(") or kind.startswith("decimal("):
            precision, scale = (int(p) for p in kind.split("(")[1].rstrip(")").split(","))
            if modes.decimal == "precise":
                parameters = {"scale": str(scale), "connect.decimal.precision": str(precision)}
                return {**base, "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                        "parameters": parameters}  # fmt: skip
            return {**base, "type": "double" if modes.decimal == "double" else "string"}
        if kind == "numeric":
            if modes.decimal != "precise":
                return {**base, "type": "double" if modes.decimal == "double" else "string"}
            inner = [{"type": "int32", "optional": False, "field": "scale"},
                     {"type": "bytes", "optional": False, "field": "value"}]  # fmt: skip
            return {**base, "type": "struct", "fields": inner, "name": "io.debezium.data.VariableScaleDecimal",
                    "version": 1, "doc": "Variable scaled decimal"}  # fmt: skip
        if kind == "date":
            name = "org.apache.kafka.connect.data.Date" if modes.time == "connect" else "io.debezium.time.Date"
            return {**base, "type": "int32", "name": name, "version": 1}
        if kind.startswith(("timestamp(", "datetime(")):
            digits = int(kind.split("(")[1].rstrip(")"))
            if modes.time == "connect":
                return {**base, "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}
            name = "io.debezium.time.Timestamp" if digits <= 3 else "io.debezium.time.MicroTimestamp"
            if modes.time == "nanoseconds":
                name = "io.debezium.time.NanoTimestamp"
            return {**base, "type": "int64", "name": name, "version": 1}
        if kind == "timestamptz":
            return {**base, "type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
        if kind.startswith("time("):
            digits = int(kind.split("(")[1].rstrip(")"))
            if modes.time == "connect":
                return {**base, "type": "int32", "name": "org.apache.kafka.connect.data.Time", "version": 1}
            if modes.time == "adaptive" and digits <= 3:
                return {**base, "type": "int32", "name": "io.debezium.time.Time", "version": 1}
            return {**base, "type": "int64", "name": "io.debezium.time.MicroTime", "version": 1}
        simple = {"int": "int32", "bigint": "int64", "text": "string", "boolean": "boolean", "tinyint(1)": "int16"}
        if kind in simple:
            return {**base, "type": simple[kind]}
        if kind == "jsonb":
            return {**base, "type": "string", "name": "io.debezium.data.Json", "version": 1}
        if kind == "uuid":
            return {**base, "type": "string", "name": "io.debezium.data.Uuid", "version": 1}
        if kind == "bytea":
            return {**base, "type": "bytes" if modes.binary == "bytes" else "string"}
        raise ValueError(kind)

    def encode(self, column: str, value: Any) -> Any:
        """A column's value as the JSON converter writes it."""
        if value is None:
            return None
        kind = self.columns[column]
        modes = self.modes
        if kind.startswith(("numeric", "decimal")):
            if modes.decimal == "double":
                return float(value)
            if modes.decimal == "string":
                return str(value)
            if kind in ("numeric", "decimal"):
                scale = max(-value.as_tuple().exponent, 0)  # type: ignore[operator]
                return {"scale": scale, "value": b64(unscaled_bytes(value, scale))}
            return b64(unscaled_bytes(value, int(kind.split(",")[1].rstrip(")"))))
        if kind == "date":
            return (value - dt.date(1970, 1, 1)).days
        if kind.startswith(("timestamp(", "datetime(")):
            digits = int(kind.split("(")[1].rstrip(")"))
            whole = micros(value)
            if modes.time == "connect" or digits <= 3:
                return whole // 1000
            return whole * 1000 if modes.time == "nanoseconds" else whole
        if kind == "timestamptz":
            return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
        if kind.startswith("time("):
            digits = int(kind.split("(")[1].rstrip(")"))
            since = (value.hour * 3600 + value.minute * 60 + value.second) * 1_000_000 + value.microsecond
            return since // 1000 if modes.time == "connect" or (modes.time == "adaptive" and digits <= 3) else since
        if kind == "tinyint(1)":
            return int(value)
        if kind == "jsonb":
            return json.dumps(value, separators=(",", ":"))
        if kind == "uuid":
            return str(value)
        if kind == "bytea":
            if modes.binary == "hex":
                return value.hex()
            if modes.binary == "base64-url-safe":
                return base64.urlsafe_b64encode(value).decode().rstrip("=")
            return b64(value)
        return value

    # -- events -------------------------------------------------------------------------------------

    def source(self, lsn: int, *, snapshot: bool = False) -> dict[str, Any]:
        ts_ms = 1_700_000_000_000 + lsn
        if self.connector == "mysql":
            return {"version": "2.7.0.Final", "connector": "mysql", "name": "shop", "ts_ms": ts_ms,
                    "snapshot": "true" if snapshot else "false", "db": "shop", "sequence": None,
                    "table": self.name, "server_id": 223344, "gtid": None, "file": "mysql-bin.000003",
                    "pos": lsn, "row": 0, "thread": 7, "query": None}  # fmt: skip
        return {"version": "2.7.0.Final", "connector": "postgresql", "name": "shop", "ts_ms": ts_ms,
                "snapshot": "true" if snapshot else "false", "db": "shop", "sequence": f'["{lsn - 1}","{lsn}"]',
                "schema": "public", "table": self.name, "txId": 500 + lsn, "lsn": lsn, "xmin": None}  # fmt: skip

    def source_schema(self) -> dict[str, Any]:
        def f(name: str, kind: str, optional: bool = False) -> dict[str, Any]:
            return {"type": kind, "optional": optional, "field": name}

        common = [f("version", "string"), f("connector", "string"), f("name", "string"), f("ts_ms", "int64"),
                  {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
                   "parameters": {"allowed": "true,last,false,incremental"}, "default": "false", "field": "snapshot"},
                  f("db", "string"), f("sequence", "string", True)]  # fmt: skip
        if self.connector == "mysql":
            rest = [f("table", "string", True), f("server_id", "int64"), f("gtid", "string", True),
                    f("file", "string"), f("pos", "int64"), f("row", "int32"), f("thread", "int64", True),
                    f("query", "string", True)]  # fmt: skip
        else:
            rest = [f("schema", "string"), f("table", "string"), f("txId", "int64", True), f("lsn", "int64", True),
                    f("xmin", "int64", True)]  # fmt: skip
        name = f"io.debezium.connector.{self.connector}.Source"
        return {"type": "struct", "fields": common + rest, "optional": False, "name": name, "field": "source"}

    def connect_schema(self) -> dict[str, Any]:
        """The envelope's Connect schema, as the JSON converter writes it beside the payload."""
        value = [self.field_schema(c) for c in self.columns]
        prefix = f"shop.public.{self.name}" if self.connector == "postgresql" else f"shop.{self.name}"
        row = {"type": "struct", "fields": value, "optional": True, "name": f"{prefix}.Value"}
        transaction = {"type": "struct", "optional": True, "name": "event.block", "version": 1, "field": "transaction",
                       "fields": [{"type": "string", "optional": False, "field": "id"},
                                  {"type": "int64", "optional": False, "field": "total_order"},
                                  {"type": "int64", "optional": False, "field": "data_collection_order"}]}  # fmt: skip
        fields = [{**row, "field": "before"}, {**row, "field": "after"}, self.source_schema(),
                  {"type": "string", "optional": False, "field": "op"},
                  {"type": "int64", "optional": True, "field": "ts_ms"}, transaction]  # fmt: skip
        return {"type": "struct", "fields": fields, "optional": False, "name": f"{prefix}.Envelope", "version": 1}

    def payload(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int) -> dict[str, Any]:
        def row(values: dict[str, Any] | None) -> dict[str, Any] | None:
            return None if values is None else {c: self.encode(c, values.get(c)) for c in self.columns}

        return {"before": row(before), "after": row(after), "source": self.source(lsn, snapshot=op == "r"),
                "op": op, "ts_ms": 1_700_000_000_500 + lsn, "transaction": None}  # fmt: skip

    def event(
        self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int, *, schema: bool = True
    ) -> str:
        """One change event's JSON (``op`` c/r/u/d), with the schema (``schemas.enable=true``) or not."""
        payload = self.payload(op, before, after, lsn)
        if schema:
            return json.dumps({"schema": self.connect_schema(), "payload": payload})
        return json.dumps(payload)

    def truncate(self, lsn: int, *, schema: bool = True) -> str:
        """A truncate event (PostgreSQL, ``op = "t"``): no row, the source and the time."""
        payload = {"source": self.source(lsn), "op": "t", "ts_ms": 1_700_000_000_500 + lsn}
        if not schema:
            return json.dumps(payload)
        fields = [self.source_schema(), {"type": "string", "optional": False, "field": "op"},
                  {"type": "int64", "optional": True, "field": "ts_ms"}]  # fmt: skip
        envelope = {"type": "struct", "fields": fields, "optional": False, "name": "shop.public.Envelope"}
        return json.dumps({"schema": envelope, "payload": payload})


def heartbeat(ts_ms: int) -> str:
    """A heartbeat message's value (topic ``__debezium-heartbeat.<prefix>``)."""
    schema = {"type": "struct", "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}],
              "optional": False, "name": "io.debezium.connector.common.Heartbeat"}  # fmt: skip
    return json.dumps({"schema": schema, "payload": {"ts_ms": ts_ms}})


def schema_change(ts_ms: int) -> str:
    """A MySQL schema change message's value (the schema change topic), without its schema."""
    return json.dumps({"source": {"version": "2.7.0.Final", "connector": "mysql", "name": "shop", "ts_ms": ts_ms,
                                  "db": "shop", "table": "accounts", "server_id": 223344, "file": "mysql-bin.000003",
                                  "pos": 1, "row": 0},
                       "ts_ms": ts_ms, "databaseName": "shop", "schemaName": None,
                       "ddl": "ALTER TABLE accounts ADD COLUMN note VARCHAR(20)",
                       "tableChanges": [{"type": "ALTER", "id": "\"shop\".\"accounts\"", "table": None}]})  # fmt: skip


def transaction_marker(status: str, ts_ms: int) -> str:
    """A transaction metadata message (``provide.transaction.metadata``): ``BEGIN`` or ``END``."""
    return json.dumps({"status": status, "id": "571:53195829", "event_count": None if status == "BEGIN" else 2,
                       "data_collections": None, "ts_ms": ts_ms})  # fmt: skip


def avro_schema(table: Table) -> dict[str, Any]:
    """The Avro schema Confluent's Avro converter makes of the envelope's Connect schema: each
    semantic type kept as ``connect.name`` (and ``connect.parameters``), a decimal as Avro's
    ``decimal`` logical type, Connect's ``Date`` and ``Timestamp`` as Avro's ``date`` and
    ``timestamp-millis``, optional fields as unions with ``null``."""
    primitive = {"int16": "int", "int32": "int", "int64": "long", "string": "string", "boolean": "boolean",
                 "bytes": "bytes", "double": "double"}  # fmt: skip
    defined: set[str] = set()

    def convert(s: dict[str, Any], record_name: str) -> Any:
        if s["type"] == "struct" and s.get("name") in defined:  # a named type is defined once, then referenced
            return ["null", s["name"]] if s.get("optional") else s["name"]
        if s["type"] == "struct":
            if s.get("name"):
                defined.add(s["name"])
            fields = [{"name": f["field"], "type": convert(f, f["field"]),
                       **({"default": None} if f.get("optional") else {})} for f in s["fields"]]  # fmt: skip
            out: Any = {"type": "record", "name": s.get("name", record_name).rsplit(".", 1)[-1],
                        "namespace": s.get("name", "x.y").rsplit(".", 1)[0], "fields": fields}  # fmt: skip
        else:
            out = {"type": primitive[s["type"]]}
            if s["type"] == "int16":
                out["connect.type"] = "int16"
        name = s.get("name")
        if name and s["type"] != "struct":
            out["connect.name"] = name
            out["connect.version"] = s.get("version", 1)
            if s.get("parameters"):
                out["connect.parameters"] = s["parameters"]
        if name == "org.apache.kafka.connect.data.Decimal":
            out.update(logicalType="decimal", precision=int(s["parameters"]["connect.decimal.precision"]),
                       scale=int(s["parameters"]["scale"]))  # fmt: skip
        if name == "org.apache.kafka.connect.data.Date":
            out["logicalType"] = "date"
        if name == "org.apache.kafka.connect.data.Timestamp":
            out["logicalType"] = "timestamp-millis"
        if s.get("name") and s["type"] == "struct":
            out["connect.name"] = name
        return ["null", out] if s.get("optional") else out

    return convert(table.connect_schema(), "Envelope")  # type: ignore[no-any-return]


def avro_row(table: Table, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int) -> dict:
    """One event as the Avro converter's record holds it: bytes as bytes, not base64 text."""

    def row(values: dict[str, Any] | None) -> dict[str, Any] | None:
        if values is None:
            return None
        out = {}
        for c in table.columns:
            encoded = table.encode(c, values.get(c))
            schema = table.field_schema(c)
            if schema.get("name") == "org.apache.kafka.connect.data.Decimal" and encoded is not None:
                encoded = base64.b64decode(encoded)
            if schema.get("name") == "io.debezium.data.VariableScaleDecimal" and encoded is not None:
                encoded = {"scale": encoded["scale"], "value": base64.b64decode(encoded["value"])}
            if schema["type"] == "bytes" and schema.get("name") is None and encoded is not None:
                encoded = base64.b64decode(encoded)
            out[c] = encoded
        return out

    return {"before": row(before), "after": row(after), "source": table.source(lsn, snapshot=op == "r"),
            "op": op, "ts_ms": 1_700_000_000_500 + lsn, "transaction": None}  # fmt: skip


def new_uuid(n: int) -> uuid.UUID:
    return uuid.UUID(int=n * 7919 + 12345)


#: The columns of the test's PostgreSQL ``accounts`` table, by their database types.
ACCOUNTS = {
    "id": "int",
    "name": "text",
    "balance": "numeric(10,2)",
    "amount": "numeric",
    "opened": "date",
    "updated_at": "timestamp(6)",
    "created": "timestamptz",
    "alarm": "time(6)",
    "active": "boolean",
    "doc": "jsonb",
    "ref": "uuid",
    "blob": "bytea",
}
