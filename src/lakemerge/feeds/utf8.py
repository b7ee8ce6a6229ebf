"""Bytes that are not UTF-8 in text feeds: bad records, never a silent replacement character
(docs/semantics.md §9 Bad records and quarantine).

Spark's CSV and JSON readers decode each line with Java's decoder, which turns bytes that are not
UTF-8 into U+FFFD without a word. A row holding U+FFFD is therefore marked (``_lm_replaced``,
counted with the batch's other counts, no job of its own); only when a batch has such rows are its
files read again as raw lines (Spark's ``text`` source keeps a line's bytes as they are), and each
marked row of a file whose lines are not all UTF-8 becomes bad, with the offending byte in hex. A
U+FFFD that the file really holds (bytes ``EF BF BD``) is valid UTF-8 and stays a value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakemerge import columns as C
from lakemerge.columns import col
from lakemerge.config.feed import FeedConfig

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakemerge.feeds.files import FeedFile

#: A run of well-formed UTF-8 sequences, over a line's bytes in hex (two digits a byte).
_VALID_HEX = (
    "(?:[0-7][0-9A-F]|(?:C[2-9A-F]|D[0-9A-F])[89AB][0-9A-F]|E[0-9A-F](?:[89AB][0-9A-F]){2}"
    "|F[0-4](?:[89AB][0-9A-F]){3})*"
)

_HINT = "; set the feed's encoding if its files use another character set"

#: Formats whose rows are decoded lines: their values may hold U+FFFD the decoder put there.
DECODED = ("csv", "json")


def checks(feed: FeedConfig) -> bool:
    """Whether ``feed``'s files are decoded as UTF-8 (its ``encoding``, the default): only there is
    a U+FFFD in a row the sign of bytes the decoder could not read."""
    return feed.encoding.strip().upper().replace("-", "").replace("_", "") == "UTF8"


def invalid(text: Column, *, of: str = "the line", hint: str = _HINT) -> Column:
    """Why ``text`` (bytes as they were read: a line of Spark's ``text`` source, or a Kafka message's
    value cast to a string) is not UTF-8: the first byte that is not, in hex, and where it is in
    ``of``; null when it is UTF-8."""
    from pyspark.sql import functions as F

    hexed = F.hex(text.cast("binary"))
    valid = F.length(F.regexp_extract(hexed, f"^({_VALID_HEX})", 1))
    return F.when(
        ~F.call_function("is_valid_utf8", text),
        F.concat(
            F.lit("invalid UTF-8: byte "),
            F.substring(hexed, valid + 1, 2),
            F.lit(" at byte "),
            (F.floor(valid / 2) + 1).cast("string"),
            F.lit(f" of {of} cannot be decoded{hint}"),
        ),
    )


def valid_text(text: Column) -> Column:
    """``text`` with every byte sequence that is not UTF-8 replaced by U+FFFD (for messages and the
    quarantine, which hold text)."""
    from pyspark.sql import functions as F

    return F.call_function("make_valid_utf8", text)


def replaced(columns: Sequence[Column]) -> Column:
    """Whether any of the string ``columns`` holds U+FFFD."""
    from pyspark.sql import functions as F

    if not columns:
        return F.lit(False)
    return F.coalesce(F.instr(F.concat_ws("", *columns), "\ufffd") > 0, F.lit(False))


def invalid_lines(spark: SparkSession, files: Sequence[tuple[FeedConfig, int, FeedFile]]) -> DataFrame | None:
    """The lines of ``files`` (feed, index of the file in the batch, file) whose feeds decode lines
    that hold U+FFFD once decoded: each with its file's index, its rank among such lines of its
    file (the header line left out), why it is bad (null for a line that is valid UTF-8 and holds a
    real U+FFFD) and the line as decoded (for the quarantine). ``None`` when no file is of such a
    feed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from lakemerge.feeds.files import literal, spark_file_path

    chosen = [(i, f, feed.header) for feed, i, f in files if feed.format in DECODED and checks(feed)]
    if not chosen:
        return None
    index = F.create_map(*[x for i, f, _ in chosen for x in (F.lit(spark_file_path(spark, f.path)), F.lit(i))])
    headed = [i for i, _, header in chosen if header]
    text = spark.read.text([literal(f.path) for _, f, _ in chosen])
    lines = text.select("value", C.file_metadata(text))
    lines = lines.withColumn(C.BLOCK, F.col(f"{C.FILE_META}.file_block_start"))
    lines = lines.withColumn(C.ROW_ID, F.monotonically_increasing_id())  # (as lakemerge.feeds.formats.position)
    lines = lines.withColumn(C.FILE, index[F.col(f"{C.FILE_META}.file_path")])
    in_file = Window.partitionBy(C.FILE).orderBy(C.BLOCK, C.ROW_ID)
    lines = lines.withColumn("_lm_line_no", F.row_number().over(in_file))
    header = F.col(C.FILE).isin(headed) & (F.col("_lm_line_no") == 1) if headed else F.lit(False)
    valid = F.expr("is_valid_utf8(value)")
    lines = lines.filter(~header & (~valid | (F.instr(F.col("value"), "\ufffd") > 0)))
    return lines.select(
        F.col(C.FILE),
        F.row_number().over(in_file).alias("_lm_utf8_rank"),
        invalid(F.col("value")).alias("_lm_utf8_reason"),
        valid_text(F.col("value")).alias("_lm_utf8_line"),
    )


def mark_invalid(frame: DataFrame, lines: DataFrame, *, multiline: bool) -> DataFrame:
    """``frame`` (normalised change records) with its rows decoded from lines that are not UTF-8
    made bad: the n-th row holding U+FFFD of a file is the n-th line holding it once decoded (one
    record a line). A multi-line record cannot be told from its lines: in a file holding lines that
    are not UTF-8, every such record holding U+FFFD is bad, with the reason of the file's first one."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    position = [C.FILE, C.BLOCK, C.ROW_ID]
    flagged = frame.filter(F.col(C.REPLACED)).select(*position)
    if multiline:
        invalid = lines.filter(F.col("_lm_utf8_reason").isNotNull())
        first = invalid.groupBy(C.FILE).agg(F.min_by("_lm_utf8_reason", "_lm_utf8_rank").alias("_lm_utf8_reason"))
        found = flagged.join(first, on=C.FILE, how="inner").withColumn("_lm_utf8_line", F.lit(None).cast("string"))
    else:
        order = Window.partitionBy(C.FILE).orderBy(C.BLOCK, C.ROW_ID)
        ranked = flagged.withColumn("_lm_utf8_rank", F.row_number().over(order))
        found = ranked.join(lines, on=[C.FILE, "_lm_utf8_rank"], how="inner").drop("_lm_utf8_rank")
    marked = frame.join(found, on=position, how="left")
    why = F.col("_lm_utf8_reason")
    return marked.select(
        *[col(c) for c in frame.columns if c not in (C.ERROR, C.RAW)],
        F.coalesce(why, F.col(C.ERROR)).alias(C.ERROR),
        F.when(why.isNotNull(), F.coalesce(F.col("_lm_utf8_line"), F.col(C.RAW))).otherwise(F.col(C.RAW)).alias(C.RAW),
    ).select(*[col(c) for c in frame.columns])
