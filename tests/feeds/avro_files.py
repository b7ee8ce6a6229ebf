"""A small writer of Avro object container files (the Avro specification's binary encoding), so
that tests write files as Kafka Connect's sinks do, with the writer schema in the header and its
``connect.*`` properties, without lakemerge or Spark."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any


def _long(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _bytes(data: bytes) -> bytes:
    return _long(len(data)) + data


def _resolve(schema: Any, named: dict[str, Any]) -> Any:
    if isinstance(schema, str) and schema in named:
        return named[schema]
    return schema


def encode(schema: Any, value: Any, named: dict[str, Any]) -> bytes:
    """``value`` in Avro's binary encoding of ``schema``."""
    schema = _resolve(schema, named)
    if isinstance(schema, list):  # a union: the first branch that takes the value
        for index, branch in enumerate(schema):
            branch = _resolve(branch, named)
            kind = branch if isinstance(branch, str) else branch.get("type")
            if (value is None) == (kind == "null"):
                return _long(index) + encode(branch, value, named)
        raise ValueError(f"no branch of {schema} for {value!r}")
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind == "null":
        return b""
    if kind == "boolean":
        return b"\x01" if value else b"\x00"
    if kind in ("int", "long"):
        return _long(int(value))
    if kind == "double":
        import struct

        return struct.pack("<d", value)
    if kind == "string":
        return _bytes(value.encode())
    if kind == "bytes":
        return _bytes(value)
    if kind == "record":
        named[schema["name"]] = schema
        if schema.get("namespace"):
            named[f"{schema['namespace']}.{schema['name']}"] = schema
        return b"".join(encode(f["type"], value.get(f["name"]), named) for f in schema["fields"])
    raise ValueError(kind)


def _register(schema: Any, named: dict[str, Any]) -> None:
    """Every named record of ``schema``, by name and full name (a union's branch may reference one
    whose definition is in a branch never taken)."""
    if isinstance(schema, list):
        for branch in schema:
            _register(branch, named)
    elif isinstance(schema, dict) and schema.get("type") == "record":
        named[schema["name"]] = schema
        if schema.get("namespace"):
            named[f"{schema['namespace']}.{schema['name']}"] = schema
        for f in schema["fields"]:
            _register(f["type"], named)


def write(path: Path, schema: dict[str, Any], records: list[dict[str, Any]]) -> Path:
    """An Avro container file at ``path``: header (schema, no codec), one block of ``records``."""
    sync = os.urandom(16)
    header = io.BytesIO()
    header.write(b"Obj\x01")
    meta = {"avro.schema": json.dumps(schema).encode(), "avro.codec": b"null"}
    header.write(_long(len(meta)))
    for key, value in meta.items():
        header.write(_bytes(key.encode()) + _bytes(value))
    header.write(_long(0))
    header.write(sync)
    named: dict[str, Any] = {}
    _register(schema, named)
    body = b"".join(encode(schema, r, named) for r in records)
    block = _long(len(records)) + _long(len(body)) + body + sync
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header.getvalue() + block)
    return path
