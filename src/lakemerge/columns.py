"""Names of the internal columns lakemerge carries beside the data while a batch is processed."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Prefix reserved for lakemerge's internal columns; feeds may not use it.
RESERVED_PREFIX = "_lm_"

FILE = "_lm_file"  # index of the source file in file order
BLOCK = "_lm_block"  # start offset of the split the row came from
ROW_ID = "_lm_rowid"  # increasing id within a split (position within the file)
#: The file a row was read from, as Spark's hidden ``_metadata`` column gives it (taken under a name
#: of lakemerge's: a feed may have a column named ``_metadata``).
FILE_META = "_lm_meta"
RAW = "_lm_raw"  # the raw record text, for error messages and quarantine
MALFORMED = "_lm_malformed"  # why the reader could not parse the row, or null
OP = "_lm_op"  # normalised operation: 'U' (upsert) or 'D' (delete)
ERROR = "_lm_error"  # why the row is bad, or null
OUTCOME = "_lm_outcome"  # what the row does to the table (see apply.classify)
STORED_FILE = "_lm_t_file"  # data file holding the stored row of the change's key
STORED_ROW = "_lm_t_row"  # the stored row's index in its data file (tables with deletion vectors)
STORED_PARTITION = "_lm_t_partition"  # the stored row's partition values, as JSON
AFTER_DELETE = "_lm_after_delete"  # partial updates: the batch deleted the key before this upsert
HEADER = "_lm_header"  # lines before the first record in the row's file
SNAPSHOT = "_lm_snapshot"  # the row comes from a full-snapshot feed
SNAPSHOT_ABSENT = "_lm_snapshot_absent"  # a delete made for a key the snapshot lacks
PLACE = "_lm_place"  # records given as a DataFrame: where the row came from (its row id: its position there)
REPLACED = "_lm_replaced"  # a decoded text row holds U+FFFD: its file may hold bytes that are not UTF-8


def quoted(name: str) -> str:
    """``name`` as a SQL identifier: in backticks, a backtick inside it doubled. Every column name
    that reaches Spark's SQL parser goes through here (a test finds any quoted by hand)."""
    return "`" + name.replace("`", "``") + "`"


def delta_path(path: str) -> str:
    """The Delta table at ``path`` as SQL names it: ``delta.`path```, a backtick in the path doubled."""
    return "delta." + quoted(path)


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal: in single quotes, a backslash or quote inside it escaped."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def col(name: str, alias: str | None = None) -> Column:
    """The column called ``name`` (of the relation or struct ``alias``), whatever characters the
    name holds: dots, spaces, backticks and all."""
    from pyspark.sql import functions as F

    return F.col(f"{alias}.{quoted(name)}" if alias else quoted(name))


def file_metadata(frame: DataFrame) -> Column:
    """Spark's file metadata of the rows of ``frame`` (a file source's DataFrame), as :data:`FILE_META`:
    found even where the files have a column named ``_metadata``, which hides it from ``col``."""
    return frame.metadataColumn("_metadata").alias(FILE_META)
