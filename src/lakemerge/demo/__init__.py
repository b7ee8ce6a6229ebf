"""chombo's product example, applied end to end: ``lakemerge demo``.

Writes the master data, an incremental file of inserts and updates, and a file of deletes whose
name starts with ``del`` into a working directory, beside the chombo properties file, then applies
them through the properties interface in two batches: the master data creates the table, then the
incremental and delete files change it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakemerge import packaged
from lakemerge.batch.attempts import apply_table
from lakemerge.config.properties_file import load_properties
from lakemerge.operations import inspect
from lakemerge.results import DemoResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = ("product_id", "category", "brand", "price", "inventory", "updated_at")
TYPES = {"price": "int", "inventory": "int"}
MASTER = "master_1427770906.csv"
INCREMENTAL = ("incr_1428415316.csv", "del_1428600000.csv")


def run_demo(workdir: str | Path, *, spark: SparkSession) -> DemoResult:
    """Lay out the demo in ``workdir`` (replacing an earlier demo there) and apply it."""
    root = Path(workdir).resolve()
    landing = root / "landing" / "products"
    table_path = root / "lake" / "products"
    for stale in (landing, table_path):
        if stale.exists():
            shutil.rmtree(stale)
    landing.mkdir(parents=True)
    props = root / "mutator.properties"
    props.write_text(packaged.read_text("lakemerge.demo", "mutator.properties"))

    def table(inputs: list[str]) -> Any:
        return load_properties(
            props, table_path=str(table_path), inputs=inputs, name="products", columns=COLUMNS, types=TYPES
        )

    (landing / MASTER).write_text(packaged.read_text("lakemerge.demo", f"data/{MASTER}"))
    first = apply_table(table([str(landing)]), spark=spark)
    for name in INCREMENTAL:
        (landing / name).write_text(packaged.read_text("lakemerge.demo", f"data/{name}"))
    second = apply_table(table([str(landing)]), spark=spark)
    assert second.version is not None
    pairs = inspect.changed_records(spark, str(table_path), second.version, key=("product_id",))
    return DemoResult(
        workdir=str(root),
        table_path=str(table_path),
        batches=(first, second),
        changes=tuple(pairs),
        history=tuple(inspect.history(spark, str(table_path))),
    )
