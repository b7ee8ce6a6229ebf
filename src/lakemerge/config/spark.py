"""How lakemerge starts (or joins) Spark: the ``[spark]`` section of a pipeline file."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from lakemerge.config.base import Model

Catalog = Literal["in-memory", "hive"]
Landing = Literal["auto", "client", "server"]
S3Commits = Literal["single-driver", "conditional"]

#: A database name.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SparkSettings(Model):
    """How lakemerge starts (or joins) Spark.

    Attributes:
        master: Spark master URL; ``local[*]`` runs embedded on this machine.
        remote: a Spark Connect server (``sc://host:15002``) to work through instead of starting
            Spark here: no JVM on this machine; the server brings Spark and Delta (``SPARK_REMOTE``
            in the environment does the same). ``master``, ``packages`` and the settings Spark
            fixes when it starts are then the server's; lakemerge sets the others for its session.
        landing: over Spark Connect, who lists landing zones and table folders, reads their
            footers and headers and moves applied files to an archive: ``client`` (this process,
            through ``pyarrow.fs``: its own disk, S3 with the session's ``spark.hadoop.fs.s3a.*``
            settings, GCS, HDFS where libhdfs loads), ``server`` (Spark's ``binaryFile`` listing on
            the server: no archive), or ``auto`` (the default: the client for object stores, for
            this machine's disk when the server runs on this machine, and for HDFS where libhdfs
            loads; the server otherwise). A classic session lists through Hadoop on the driver.
        s3_commits: how Delta commits to tables on ``s3a:``. ``single-driver`` (Delta's default S3
            log store): safe while one driver writes a table; two drivers committing one version at
            once can both succeed, and one commit is lost. ``conditional``: each commit is a
            put-if-absent through S3's conditional write (``If-None-Match``), so that of two drivers
            committing one version one wins and the other commits after it (its log store ships
            compiled, a JRE runs it; the store must support conditional writes, as S3 does; a
            Spark Connect server's own settings decide for its sessions).
        app_name: the application name shown by Spark.
        conf: extra Spark settings, passed through unchanged (``spark.executor.memory`` ...).
        packages: extra Maven coordinates added to ``spark.jars.packages`` beside Delta's.
        log_file: where Spark's own log goes; ``None`` picks a file under the temp directory.
        catalog: where table names live. ``in-memory``: the session's own catalog (names vanish
            with it). ``hive``: a Hive metastore, so that ``spark-sql``, the Thrift server and other
            metastore clients find the tables by name (docs/deploy.md).
        metastore_uri: with ``hive``, a running metastore service (``thrift://host:9083``). Without
            it, an embedded Derby metastore in ``metastore_dir`` (one process at a time).
        metastore_dir: the embedded Derby metastore's folder (default ``metastore`` beside the
            pipeline file, or in the current directory).
        warehouse: ``spark.sql.warehouse.dir`` for the catalog's databases (default: Spark's).
        database: the database tables are registered in when they name none.
    """

    master: str = "local[*]"
    remote: str | None = None
    landing: Landing = "auto"
    s3_commits: S3Commits = "single-driver"
    app_name: str = "lakemerge"
    conf: dict[str, str] = Field(default_factory=dict)
    packages: tuple[str, ...] = ()
    log_file: str | None = None
    catalog: Catalog = "in-memory"
    metastore_uri: str | None = None
    metastore_dir: str | None = None
    warehouse: str | None = None
    database: str = "default"

    def over(self, base: SparkSettings) -> SparkSettings:
        """These settings laid over ``base``: the keys given here win, ``conf`` settings merge
        (these last) and ``packages`` add up."""
        given = {name: getattr(self, name) for name in self.model_fields_set}
        given["conf"] = {**base.conf, **self.conf}
        given["packages"] = tuple(dict.fromkeys((*base.packages, *self.packages)))
        return base.model_copy(update=given)

    @field_validator("remote")
    @classmethod
    def _connect_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("sc://"):
            raise ValueError(f"'{value}' is not a Spark Connect URL (sc://host:port)")
        return value

    @field_validator("database")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not IDENTIFIER.fullmatch(value):
            raise ValueError(f"'{value}' is not a database name (letters, digits and _, not starting with a digit)")
        return value

    @model_validator(mode="after")
    def _hive_settings(self) -> SparkSettings:
        if self.catalog != "hive" and (self.metastore_uri or self.metastore_dir):
            raise ValueError("metastore_uri and metastore_dir need catalog = 'hive'")
        if self.metastore_uri and self.metastore_dir:
            raise ValueError("give metastore_uri (a metastore service) or metastore_dir (embedded Derby), not both")
        return self

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: object) -> object:
        if isinstance(value, dict):
            return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value
