"""Start real Spark services on this machine from the installed PySpark, as separate processes: a
standalone master with workers, and the Spark Thrift server. Used by tests/cluster/test_cluster.py."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(work / "logs"),
            "SPARK_WORKER_DIR": str(work / "worker"),
            "PYSPARK_PYTHON": sys.executable,
        }
    )
    return env


def _spark_class(main: str, *args: str, work: Path, log: str) -> subprocess.Popen[bytes]:
    work.mkdir(parents=True, exist_ok=True)
    out = (work / log).open("wb")
    return subprocess.Popen(
        [str(SPARK_HOME / "bin" / "spark-class"), main, *args],
        env=_env(work),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_port(port: int, *, timeout: float, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.5)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s:\n{log.read_text()[-3000:]}")


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, 15)
    for p in processes:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
            p.wait()


@contextlib.contextmanager
def standalone(work: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g") -> Iterator[str]:
    """A standalone master and ``workers`` workers on localhost; yields the master URL."""
    port = free_port()
    processes = [
        _spark_class(
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(free_port()),
            work=work,
            log="master.log",
        )
    ]
    try:
        wait_for_port(port, timeout=90, process=processes[0], log=work / "master.log")
        url = f"spark://127.0.0.1:{port}"
        for n in range(workers):
            processes.append(
                _spark_class(
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                    "--webui-port", str(free_port()), "--work-dir", str(work / f"worker-{n}"), url,
                    work=work, log=f"worker-{n}.log",
                )
            )  # fmt: skip
        deadline = time.monotonic() + 90
        while sum("Successfully registered with master" in (work / f"worker-{n}.log").read_text(errors="replace")
                  for n in range(workers)) < workers:  # fmt: skip
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not register with the master")
            time.sleep(0.5)
        yield url
    finally:
        _stop(processes)


@contextlib.contextmanager
def thrift_server(work: Path, conf: dict[str, str]) -> Iterator[int]:
    """The Spark Thrift server (HiveServer2 protocol) in local mode with ``conf``; yields its port."""
    port = free_port()
    # The server builds its sessions' catalogs with a class loader that does not see jars added by
    # spark.jars.packages: Delta's jars (resolved by the earlier lakemerge run) go on the class path.
    jars = sorted(str(j) for j in Path.home().glob(".ivy2*/jars/*.jar") if j.name.startswith(("io.delta_", "io.unity")))
    conf = {**conf, "spark.driver.extraClassPath": ":".join(jars)}
    args = ["--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2", "--master", "local[2]"]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    args += ["spark-internal", "--hiveconf", f"hive.server2.thrift.port={port}",
             "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1"]  # fmt: skip
    process = _spark_class("org.apache.spark.deploy.SparkSubmit", *args, work=work, log="thrift.log")
    try:
        wait_for_port(port, timeout=240, process=process, log=work / "thrift.log")
        yield port
    finally:
        _stop([process])


def beeline(port: int, sql: str, *, work: Path) -> list[list[str]]:
    """Run ``sql`` through beeline (Hive's JDBC client, a separate JVM); rows as lists of strings."""
    result = subprocess.run(
        [str(SPARK_HOME / "bin" / "beeline"), "-u", f"jdbc:hive2://127.0.0.1:{port}/default",
         "--silent=true", "--showHeader=false", "--outputformat=tsv2", "-e", sql],
        env=_env(work), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"beeline failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    # beeline echoes its prompt ("0: jdbc:hive2://...> ") before the first row of a result.
    lines = (re.sub(r"^\d+: jdbc:\S*> ?", "", line) for line in result.stdout.splitlines())
    return [line.split("\t") for line in lines if line.strip()]
