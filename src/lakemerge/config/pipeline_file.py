"""Read a pipeline TOML file into a :class:`PipelineConfig`.

Layout::

    [spark]                      # optional
    master = "local[*]"          # or spark://host:7077, yarn, k8s://...
    conf = { "spark.sql.shuffle.partitions" = "4" }
    catalog = "hive"             # optional: register tables in a Hive metastore

    [tables.products]
    path = "lake/products"       # relative paths are relative to this file
    key = ["product_id"]
    sequence = ["updated_at"]
    partition_by = ["category"]

    [tables.products.feed]
    location = "landing/products"
    format = "csv"
    header = true
    op_column = "op"
    delete_codes = ["D"]

    [groups.sales]               # optional: tables applied together
    tables = ["orders", "order_lines"]
    state = "lake/_groups/sales"

    [sources.shop]               # optional: a whole database from Debezium, a table per topic
    bootstrap_servers = "kafka:9092"
    topic_pattern = "shop[.]public[.].*"
    table_path = "lake/{schema}/{table}"
    checkpoint = "checkpoints/shop"
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from lakemerge.config.loading import is_uri, validate
from lakemerge.config.pipeline import PipelineConfig
from lakemerge.errors import ConfigError


def load_pipeline(path: str | os.PathLike[str]) -> PipelineConfig:
    """Parse and validate a pipeline file.

    Raises:
        ConfigError: the file is missing, is not valid TOML, or a key is wrong (the message
            names the key, e.g. ``tables.products.feed.format``).
    """
    file = Path(path)
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("pipeline file does not exist", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read pipeline file: {exc}", source=source) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", source=source) from None
    _resolve_paths(data, file.resolve().parent)
    data["source"] = source
    config = validate(PipelineConfig, data, source=source)
    for name, table in config.tables.items():
        problem = table.unknown_column()
        if problem is not None:
            raise ConfigError(problem[1], key=f"tables.{name}.{problem[0]}", source=source)
    return config


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Make relative table, feed, stream checkpoint, source and metastore paths relative to the
    pipeline file's folder."""
    spark = data.get("spark")
    if isinstance(spark, dict):
        for key in ("metastore_dir", "warehouse"):
            if isinstance(spark.get(key), str):
                spark[key] = _absolute(spark[key], base)
        if spark.get("catalog") == "hive" and not spark.get("metastore_uri"):
            # The embedded metastore and its databases' folders live beside the pipeline file, not
            # in whatever directory a scheduler starts the job from.
            spark.setdefault("metastore_dir", str(base / "metastore"))
            spark.setdefault("warehouse", str(base / "warehouse"))
    sources = data.get("sources")
    if isinstance(sources, dict):
        for source in sources.values():
            for key in ("table_path", "checkpoint", "state", "staging") if isinstance(source, dict) else ():
                if isinstance(source.get(key), str):
                    source[key] = _absolute(source[key], base)
    groups = data.get("groups")
    if isinstance(groups, dict):
        for group in groups.values():
            if isinstance(group, dict) and isinstance(group.get("state"), str):
                group["state"] = _absolute(group["state"], base)
            stream = group.get("stream") if isinstance(group, dict) else None
            if isinstance(stream, dict) and isinstance(stream.get("checkpoint"), str):
                stream["checkpoint"] = _absolute(stream["checkpoint"], base)
    tables = data.get("tables")
    if not isinstance(tables, dict):
        return
    for table in tables.values():
        if not isinstance(table, dict):
            continue
        if isinstance(table.get("path"), str):
            table["path"] = _absolute(table["path"], base)
        stream = table.get("stream")
        if isinstance(stream, dict) and isinstance(stream.get("checkpoint"), str):
            stream["checkpoint"] = _absolute(stream["checkpoint"], base)
        for feed in [table.get("feed"), *(table.get("feeds") or [])]:
            if not isinstance(feed, dict):
                continue
            if isinstance(feed.get("archive"), str):
                feed["archive"] = _absolute(feed["archive"], base)
            loc = feed.get("location")
            if isinstance(loc, str):
                feed["location"] = _absolute(loc, base)
            elif isinstance(loc, list):
                feed["location"] = [_absolute(p, base) if isinstance(p, str) else p for p in loc]


def _absolute(path: str, base: Path) -> str:
    if not path or is_uri(path) or os.path.isabs(path):
        return path
    return str(base / path)
