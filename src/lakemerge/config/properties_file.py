"""Read a chombo ``RecordSetBulkMutator`` properties file unchanged.

Keys are read with or without chombo's ``rsbm.`` prefix:

==================================  ============================================================
``id.field.ordinals``               comma list of 0-based field ordinals forming the key
``temporal.ordering.field.ordinal`` ordinal of the field ordering versions (optional)
``temporal.ordering.field.numeric`` ``true``: compare that field as a number (default ``true``)
``op.code.field.ordinal``           ordinal of the op-code field (not stored in the table)
``deleted.op.code``                 op code meaning delete (default ``D``)
``deleted.record.file.prefix``      files whose name starts with it hold deletes only
``field.delim.regex``               regular expression splitting lines (default ``,``)
==================================  ============================================================

Fields are named ``c0``, ``c1``, ... by ordinal unless the user names them, with the extra key
``lakemerge.columns`` (comma list of names, by ordinal) or the ``columns`` argument.
Without an ordering field, the number after the last ``_`` of each file name orders the files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lakemerge.config.loading import validate
from lakemerge.config.table import TableConfig
from lakemerge.errors import ConfigError


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text as ``java.util.Properties`` does: ``key=value``,
    ``key: value`` or ``key value``; ``#``/``!`` comments; a line ending in an odd number of
    backslashes continues on the next; ``\\t``, ``\\n``, ``\\uXXXX`` and ``\\x`` → ``x`` escapes."""
    result: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        entry, pending = pending + line, ""
        key, value = _split_entry(entry)
        result[_unescape(key)] = _unescape(value)
    if pending:
        key, value = _split_entry(pending)
        result[_unescape(key)] = _unescape(value)
    return result


def _split_entry(entry: str) -> tuple[str, str]:
    i = 0
    while i < len(entry):
        ch = entry[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            key = entry[:i]
            rest = entry[i:].lstrip(" \t\f")
            if rest[:1] in ("=", ":") and ch not in "=:":
                rest = rest[1:].lstrip(" \t\f")
            elif ch in "=:":
                rest = entry[i + 1 :].lstrip(" \t\f")
            return key, rest
        i += 1
    return entry, ""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and len(text) >= i + 6:
            try:
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def load_properties(
    path: str | os.PathLike[str],
    *,
    table_path: str,
    inputs: Sequence[str],
    name: str = "table",
    columns: Sequence[str] = (),
    types: dict[str, str] | None = None,
) -> TableConfig:
    """Build a TableConfig from a chombo properties file.

    Args:
        path: the ``.properties`` file.
        table_path: where the Delta table lives.
        inputs: change files or directories.
        name: the table's name in results and logs.
        columns: names for the fields by ordinal (overrides ``lakemerge.columns``).
        types: Spark SQL types per column name, cast after reading.

    Raises:
        ConfigError: naming the properties file and key at fault.
    """
    source = str(path)
    try:
        props = parse_properties(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("properties file does not exist", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read properties file: {exc}", source=source) from None
    return table_from_properties(
        props, source=source, table_path=table_path, inputs=inputs, name=name, columns=columns, types=types
    )


def table_from_properties(
    props: dict[str, str],
    *,
    source: str | None,
    table_path: str,
    inputs: Sequence[str],
    name: str = "table",
    columns: Sequence[str] = (),
    types: dict[str, str] | None = None,
) -> TableConfig:
    """Map chombo's keys onto a TableConfig (see the module docstring)."""
    keys = _Properties(props, source, columns)
    key_cols = keys.key_columns()
    col_types = dict(types or {})
    sequence, file_order = keys.ordering(col_types)
    op_column, delete_code, prefix = keys.deletes()
    # Other keys are ignored on purpose: chombo's files carry settings of other jobs too.
    data = {
        "name": name,
        "path": table_path,
        "key": key_cols,
        "sequence": sequence,
        "feed": {
            "location": list(inputs),
            "format": "text",
            "delimiter_regex": (keys.get("field.delim.regex") or ("", ","))[1],
            "columns": keys.names,
            "types": col_types,
            "op_column": op_column,
            "delete_codes": [delete_code],
            "delete_file_prefix": prefix,
            "file_order": file_order,
        },
    }
    return validate(TableConfig, data, source=source)


class _Properties:
    """chombo's keys of one file, read with or without the ``rsbm.`` prefix; ``names``: the fields'
    names by ordinal (``--columns``, else ``lakemerge.columns``; none: ``c0``, ``c1``, ...)."""

    def __init__(self, props: dict[str, str], source: str | None, columns: Sequence[str]) -> None:
        self.props, self.source = props, source
        self.names = list(columns)
        if not self.names and (named := self.get("lakemerge.columns")):
            self.names = [c.strip() for c in named[1].split(",")]

    def get(self, key: str) -> tuple[str, str] | None:
        """The key as the file spells it, and its value; ``None`` when absent or empty."""
        for full in (f"rsbm.{key}", key):
            if full in self.props and self.props[full] != "":
                return full, self.props[full]
        return None

    def ordinal(self, key: str, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ConfigError(
                f"must be a field ordinal (0, 1, 2, ...), got {text!r}", key=key, source=self.source
            ) from None
        if value < 0:
            raise ConfigError(f"must be 0 or more, got {value}", key=key, source=self.source)
        return value

    def column(self, key: str, text: str) -> str:
        """The name of the field at the ordinal ``text`` that ``key`` gives."""
        index = self.ordinal(key, text)
        if not self.names:
            return f"c{index}"
        if index >= len(self.names):
            raise ConfigError(
                f"ordinal {index} is beyond the {len(self.names)} named columns ({', '.join(self.names)})",
                key=key,
                source=self.source,
            )
        return self.names[index]

    def key_columns(self) -> list[str]:
        """The key: ``id.field.ordinals``, a comma list for a composite key."""
        ids = self.get("id.field.ordinals")
        if ids is None:
            raise ConfigError(
                "required key is missing (the key field ordinals, e.g. 0 or 0,2)",
                key="id.field.ordinals",
                source=self.source,
            )
        id_key, id_text = ids
        key_cols = [self.column(id_key, part) for part in id_text.split(",") if part.strip()]
        if not key_cols:
            raise ConfigError("lists no ordinal", key=id_key, source=self.source)
        return key_cols

    def ordering(self, types: dict[str, str]) -> tuple[list[str], str]:
        """The sequence columns and the file order: the ordering field, typed ``bigint`` in
        ``types`` when numeric; without one, the number in each file's name."""
        temporal = self.get("temporal.ordering.field.ordinal")
        if not temporal:
            return [], "name_number"
        seq_col = self.column(*temporal)
        numeric = self.get("temporal.ordering.field.numeric")
        flag = numeric[1].strip().lower() if numeric else "true"
        if flag not in ("true", "false"):
            raise ConfigError(
                f"must be true or false, got {flag!r}", key=numeric[0] if numeric else None, source=self.source
            )
        if flag == "true":
            types.setdefault(seq_col, "bigint")
        return [seq_col], "name"

    def deletes(self) -> tuple[str | None, str, str | None]:
        """How deletes are told: the op-code column, the delete code, the delete-file prefix (one
        of the column and the prefix at least)."""
        op = self.get("op.code.field.ordinal")
        op_column = self.column(*op) if op else None
        delete_code = (self.get("deleted.op.code") or ("", "D"))[1].strip()
        prefix_entry = self.get("deleted.record.file.prefix")
        prefix = prefix_entry[1].strip() if prefix_entry else None
        if op_column is None and not prefix:
            raise ConfigError(
                "deletes need either op.code.field.ordinal or deleted.record.file.prefix; set one of them",
                key="op.code.field.ordinal",
                source=self.source,
            )
        return op_column, delete_code, prefix
