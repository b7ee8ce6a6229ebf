"""The backend of a Spark Connect session: a client here, Spark and Delta on the server, reached
through DataFrames and SQL alone (:mod:`lakemerge.spark.backend` says what a backend is).

No JVM is driven from here: the classic fast paths that need one (writes without MERGE, the one-job
append, Delta's checksums) give way to their SQL forms, chosen where each is decided.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from lakemerge.columns import delta_path
from lakemerge.errors import ConfigError, first_line
from lakemerge.spark.backend import Backend, Stage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from lakemerge.spark.versions import Pairing

A = TypeVar("A")
B = TypeVar("B")

#: Tasks at once when the server's settings do not say (a guess for a small server).
_PARALLELISM = 8

#: A path no table is at: Delta's answer for it tells whether the server has Delta at all.
_NOWHERE = "/lakemerge-probe/no-table-here"


class ConnectBackend(Backend):
    """A session on a Spark Connect server."""

    jvm = False
    runs_batches = False

    def check_delta(self, version: str, matching: Pairing) -> None:
        try:
            self.spark.sql(f"DESCRIBE DETAIL {delta_path(_NOWHERE)}").collect()
        except Exception as exc:
            text = str(exc)
            if "DELTA" in text or "Delta" in text or "not a Delta table" in text:
                return  # (Delta answered: no table there)
            raise ConfigError(
                f"the Spark Connect server has no Delta Lake: start it with the package {matching.delta} and "
                f"the settings `lakemerge conf` prints ({first_line(exc)})"
            ) from None

    def parallelism(self) -> int:
        conf = self.spark.conf
        given = conf.get("spark.default.parallelism", None)
        if given:
            return max(1, int(given))
        local = re.fullmatch(r"local\[(\d+)(?:,\d+)?\]", str(conf.get("spark.master", "") or ""))
        if local:
            return max(1, int(local.group(1)))
        executors, cores = conf.get("spark.executor.instances", None), conf.get("spark.executor.cores", None)
        if executors and cores:
            return max(1, int(executors) * int(cores))
        return _PARALLELISM

    def quiet(self) -> None:
        return None  # (Spark's log is the server's)

    def leaf(self, kept: DataFrame) -> DataFrame:
        return kept

    def in_tail(self, first: Callable[[], A], then: Callable[[], B]) -> tuple[A, B]:
        return first(), then()

    def identity(self) -> Any:
        return str(self.spark.session_id)  # type: ignore[attr-defined]

    def json_schema(self, texts: DataFrame) -> StructType:
        """What Spark's JSON reader would infer, from the merged schema of the texts parsed as
        variants (the reader of a column of texts is not offered over Connect): objects become
        structs, integers ``bigint`` and numbers with a fraction ``double``, as the JSON reader types them."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        (value,) = texts.columns
        parsed = texts.select(F.try_parse_json(F.col(value)).alias("v")).where(F.col("v").isNotNull())
        row = parsed.agg(F.schema_of_variant_agg(F.col("v")).alias("s")).collect()[0]
        found = _as_spark_ddl(str(row["s"] or "OBJECT<>"))
        parsed_type = StructType.fromDDL(found) if found.strip() else StructType()
        assert isinstance(parsed_type, StructType)
        return parsed_type

    def stages(self) -> list[Stage] | None:
        return None

    def on_progress(self, report: Callable[[list[Stage]], None]) -> Callable[[], None] | None:
        lock = threading.Lock()

        def handler(stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
            shown = (
                []
                if done
                else [
                    Stage(f"{operation_id}:{s.stage_id}", f"stage {s.stage_id}", s.num_completed_tasks, s.num_tasks)
                    for s in (stages or ())
                    if not s.done
                ]
            )
            with lock:
                report(shown)

        register = getattr(self.spark, "registerProgressHandler", None)
        if register is None:
            return None
        register(handler)
        remove: Any = self.spark.removeProgressHandler
        return lambda: remove(handler)


def _as_spark_ddl(variant: str) -> str:
    """A variant schema (``OBJECT<a: BIGINT, b: ARRAY<DECIMAL(3,1)>>``) as the struct fields a JSON
    reader would infer (``a BIGINT, b ARRAY<DOUBLE>``): objects as structs, fractional decimals
    as doubles, variants (values of mixed types) as strings."""
    text = variant.strip()
    text = re.sub(r"\bOBJECT<", "STRUCT<", text)
    text = re.sub(r"\bDECIMAL\(\s*\d+\s*,\s*[1-9]\d*\s*\)", "DOUBLE", text)
    whole = r"\bDECIMAL\(\s*(\d+)\s*,\s*0\s*\)"
    text = re.sub(whole, lambda m: "BIGINT" if int(m.group(1)) <= 18 else m.group(0), text)
    text = re.sub(r"\b(VARIANT|VOID)\b", "STRING", text)
    if text.startswith("STRUCT<") and text.endswith(">"):
        return text[len("STRUCT<") : -1]
    return ""
