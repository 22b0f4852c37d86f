"""Pipeline tests: one Spark session for all of them, light (two cores, no UI, two shuffle
partitions, a small driver), on `local[2,2]`, where a failed task is tried once more as on a
cluster. Every test module is in the xdist group "pipeline", so the session starts once, in one
worker. Each test has its own database (`db_url`) and directories; JDBC reaches the test server
over TCP or, for the embedded server, over its unix socket.

Every Spark JVM of these tests compiles with C1 alone (TEST_JVM_OPTIONS): they are short and
their data tiny, so C2's compiler threads cost more CPU than its code saves. Measured on the
cluster test, the JVMs' CPU halved (a driver's some 27 CPU-s to 14)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from app.pipeline.progress import Progress, quiet_progress
from app.pipeline.session import SparkOptions, start_session

# -XX:TieredStopAtLevel=1: the JIT's first tier only (C1), no C2.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session", autouse=True)
def quick_jvms() -> Iterator[None]:
    """The JVMs of drivers (in this process, and of the `pqs` commands tests start) and of a
    standalone cluster's master and worker (tests/pipeline/cluster.py) take TEST_JVM_OPTIONS:
    Spark's launcher adds SPARK_SUBMIT_OPTS to a driver's Java options, SPARK_DAEMON_JAVA_OPTS to
    a daemon's (and, unlike JAVA_TOOL_OPTIONS, the JVM does not announce them on stderr, which
    tests read). A cluster's executors take it from the application's settings (test_cluster)."""
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
            patch.setenv(variable, TEST_JVM_OPTIONS, prepend=" ")
        yield


@pytest.fixture(scope="session")
def spark(quick_jvms: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The session every pipeline test shares."""
    options = SparkOptions(
        master="local[2,2]",
        app_name="pqs-tests",
        driver_memory="768m",
        shuffle_partitions=2,
        conf={
            "spark.default.parallelism": "2",
            "spark.local.dir": str(tmp_path_factory.mktemp("spark-local")),
            "spark.sql.adaptive.coalescePartitions.enabled": "false",
        },
    )
    session = start_session(options)
    yield session
    session.stop()


@pytest.fixture
def progress() -> Progress:
    """Progress that prints nothing."""
    return quiet_progress()


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    """Where this test's archive goes."""
    return tmp_path / "archive"
