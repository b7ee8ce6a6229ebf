"""A single-node Kafka broker in KRaft mode, from Apache Kafka's own jars (resolved by Maven, cached
under ~/.cache/lakemerge-tests), started on 127.0.0.1: for the streaming tests and the streaming
benchmark (``python -m bench.streaming``)."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The broker's version (its jars resolve from Maven Central with their dependencies).
KAFKA_VERSION = "4.1.1"

_POM = """<project>
  <modelVersion>4.0.0</modelVersion>
  <groupId>lakemerge-tests</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{version}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-nop</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
"""


def classpath() -> str:
    """The broker's class path: Kafka's jars and their dependencies, resolved once by Maven."""
    folder = (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lakemerge-tests" / f"kafka-{KAFKA_VERSION}"
    )
    found = folder / "classpath.txt"
    if found.exists() and all(Path(p).exists() for p in found.read_text().split(os.pathsep)):
        return found.read_text()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("the Kafka tests need Maven (mvn) to resolve Apache Kafka's jars")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pom.xml").write_text(_POM.format(version=KAFKA_VERSION))
    subprocess.run(
        [mvn, "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={found}"],
        cwd=folder,
        check=True,
        timeout=900,
    )
    return found.read_text()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def broker(folder: Path, *, partitions: int = 3) -> Iterator[str]:
    """A running broker (topics created on first use, with ``partitions`` partitions); its address."""
    port, controller = _free_port(), _free_port()
    shutil.rmtree(folder / "logs", ignore_errors=True)  # a fresh broker: an earlier run's log is formatted already
    folder.mkdir(parents=True, exist_ok=True)
    settings = folder / "server.properties"
    settings.write_text(
        "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={folder / 'logs'}",
                f"num.partitions={partitions}",
                "auto.create.topics.enable=true",
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
            ]
        )
        + "\n"
    )
    java = ["java", "-Xmx512m", "-cp", classpath()]
    cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    subprocess.run(
        [*java, "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(settings), "--standalone"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    log = (folder / "broker.log").open("wb")
    process = subprocess.Popen([*java, "kafka.Kafka", str(settings)], stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(port, process, folder / "broker.log")
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _wait_for(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Kafka broker exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                time.sleep(1.0)  # (the listener is up; let the controller elect itself)
                return
        time.sleep(0.2)
    raise RuntimeError(f"no Kafka broker on port {port} after {timeout} s:\n{log.read_text()[-3000:]}")


def produce(spark: Any, bootstrap: str, topic: str, messages: Sequence[tuple[int, str | None, str | None]]) -> None:
    """Send ``messages`` (partition, key, value; ``None`` for a null key or value, a tombstone) to
    ``topic``, in order within each partition (one Spark task writes them all)."""
    frame = spark.createDataFrame(list(messages), "partition INT, key STRING, value STRING").coalesce(1)
    frame.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
