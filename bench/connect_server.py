"""A Spark Connect server on 127.0.0.1, started with ``spark-submit`` from the installed PySpark's
own jars (which include Spark Connect) and the settings ``lakemerge conf`` gives: Delta's package
and extensions, Spark's Avro and Kafka sources. For the tests of the Connect backend and for the
benchmark's Connect cells.

Its Python workers (the functions a stream's ``foreachBatch`` pickles to the server) run the
interpreter and path given, which must import lakemerge.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> str:
    """The installed PySpark's folder, which holds Spark's jars and ``bin/spark-submit``."""
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_conf(*, master: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings the server starts with: lakemerge's session settings (as ``lakemerge conf``
    prints them), with Spark's Kafka source among the packages, and ``extra``."""
    from lakemerge.config import SparkSettings
    from lakemerge.spark.session import session_conf
    from lakemerge.spark.versions import installed_pairing

    settings = SparkSettings(master=master, packages=(installed_pairing().kafka,))
    conf = session_conf(settings)
    conf.update(extra or {})
    return conf


@contextmanager
def server(
    folder: Path,
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    python: str = sys.executable,
    python_path: str = "",
) -> Iterator[str]:
    """A running Spark Connect server (its log in ``folder``); its ``sc://`` URL."""
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    settings = server_conf(master=master, extra=conf)
    settings.update(
        {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        }
    )
    command = [os.path.join(spark_home(), "bin", "spark-submit"), "--class", SERVER_CLASS, "--master", master]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS"))}
    env.update({"PYSPARK_PYTHON": python, "SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": "127.0.0.1"})
    if python_path:
        env["PYTHONPATH"] = python_path
    log = (folder / "connect-server.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder)
    try:
        _wait_for(port, process, folder / "connect-server.log")
        yield f"sc://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_for(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the Spark Connect server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"no Spark Connect server on port {port} after {timeout} s:\n{log.read_text()[-3000:]}")
