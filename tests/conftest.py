"""Shared fixtures: one SparkSession for the whole run (for each worker process, with ``-n 2``),
small and quiet.

Hypothesis: the suite draws the same examples on every run (profile ``suite``, derandomized), so that
its time is the same from run to run and a failure reproduces; ``--hypothesis-profile explore`` draws
new ones on each run, to look for failures the fixed draw misses.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from hypothesis import settings

import lakemerge

settings.register_profile("suite", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("suite")


@contextmanager
def _one_start_at_a_time() -> Iterator[None]:
    """Worker processes (pytest-xdist) start their sessions one after the other: each resolves the
    Spark packages through Ivy's cache in the user's home, which two resolutions at once can leave
    half written."""
    if "PYTEST_XDIST_WORKER" not in os.environ or sys.platform == "win32":
        yield
        return
    import fcntl

    with open(os.path.join(tempfile.gettempdir(), f"lakemerge-tests-{os.getuid()}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


#: The settings of the suite's one Spark (the session's, or the Connect server's).
SUITE_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    # With the UI off nobody reads the SQL executions Spark keeps for it (a thousand by
    # default, some 50 MB of plan descriptions in this suite's 1 GB driver).
    "spark.sql.ui.retainedExecutions": "50",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=("classic", "connect"),
        default="classic",
        help="the session the tests use: a classic local session (the default), or a Spark Connect "
        "client of a server the suite starts on 127.0.0.1 (tests marked 'classic' are skipped then)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--backend") != "connect":
        return
    skip = pytest.mark.skip(reason="pins the classic backend (a JVM in the test process)")
    for item in items:
        if item.get_closest_marker("classic") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--backend"))


@pytest.fixture(scope="session")
def connect_url(backend_name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """With ``--backend connect``: a Spark Connect server for this worker, started from the
    installed PySpark with lakemerge's settings (its Python workers import this checkout's
    lakemerge); its URL. ``None`` for the classic backend."""
    if backend_name != "connect":
        yield None
        return
    from bench.connect_server import server

    source = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    with ExitStack() as running:
        with _one_start_at_a_time():  # (the server resolves Spark's packages as it starts)
            url = running.enter_context(server(tmp_path_factory.mktemp("connect"), conf=SUITE_CONF, python_path=source))
        yield url


@pytest.fixture(scope="session")
def remote_args(connect_url: str | None) -> list[str]:
    """What a ``lakemerge`` command a test starts adds to work on the suite's backend."""
    return ["--remote", connect_url] if connect_url else []


@pytest.fixture(scope="session")
def spark(connect_url: str | None, request: pytest.FixtureRequest) -> Iterator[object]:
    if connect_url is not None:
        session = lakemerge.get_spark(lakemerge.SparkSettings(remote=connect_url))
        yield session
        session.stop()
        return
    from lakemerge.spark.packages import with_storage
    from lakemerge.spark.versions import installed_pairing

    settings = lakemerge.SparkSettings(
        master="local[2]",
        app_name="lakemerge-tests",
        packages=(installed_pairing().kafka,),  # (the streaming tests read Kafka)
        conf=SUITE_CONF,
    )
    if any(item.get_closest_marker("s3") is not None for item in request.session.items):
        settings = with_storage(settings, ["s3a://tests"])  # (S3A's jars, as lakemerge adds them)
    from pyspark.sql import SparkSession

    found = SparkSession.getActiveSession()
    if found is not None:  # (it would be reused as it is: another master, no Kafka source, ...)
        pytest.fail(f"a Spark session ({found.conf.get('spark.master')}) was started before the suite's own")
    with _one_start_at_a_time():
        session = lakemerge.get_spark(settings)
    _SUITE_SESSION.append(session)
    yield session
    session.stop()


#: The suite's session, once the ``spark`` fixture has started it.
_SUITE_SESSION: list[object] = []


@pytest.fixture(autouse=True)
def _no_session_of_its_own(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that runs lakemerge in this process without the ``spark`` fixture must not start a
    session: later tests of the worker would get it (``get_spark`` reuses an active session) in place
    of the suite's (two cores, the Kafka source, the suite's settings)."""
    yield
    if _SUITE_SESSION or "pyspark.sql" not in sys.modules:
        return
    from pyspark.sql import SparkSession

    found = SparkSession.getActiveSession()
    if found is not None and not type(found).__module__.startswith("pyspark.sql.connect"):
        found.stop()
        pytest.fail(f"{request.node.nodeid} started a Spark session of its own: give it the spark fixture")


@pytest.fixture(scope="module", autouse=True)
def _forget_tables() -> Iterator[None]:
    """Drop Delta's cached logs after each module. Delta keeps every table it has read (up to 10,000)
    with its snapshot's query plans; across the suite's temporary tables that grew with every module
    (76 MB after the first 120 tests) until the shared 1 GB driver ran out of memory. A process
    applying batches to its own pipeline's tables keeps only those."""
    yield
    if "pyspark.sql" not in sys.modules:
        return
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and not type(active).__module__.startswith("pyspark.sql.connect"):
        active._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Kafka broker the streaming tests and the Kafka guide share (started once, on 127.0.0.1);
    its address."""
    from bench.kafka import broker

    with broker(tmp_path_factory.mktemp("kafka")) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def spark41(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A fresh virtual environment outside the checkout holding the built wheel with its ``spark``
    extra beside PySpark 4.1 (the older supported line): for ``-m compat``."""
    from tests.wheels import build, clean_copy, fresh_venv

    dist = build(clean_copy(tmp_path_factory.mktemp("checkout")), tmp_path_factory.mktemp("dist"))
    root = tmp_path_factory.mktemp("spark41")
    venv = fresh_venv(root / "venv", root / "spark.log")
    venv.install(f"{dist['wheel']}[spark]", "pyspark>=4.1.0,<4.2", cwd=root)
    yield venv
