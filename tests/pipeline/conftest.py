"""Pipeline tests: one Spark session for all of them, light (two cores, no UI, two shuffle
partitions, a small driver), on `local[2,2]`, where a failed task is tried once more as on a
cluster. Every test module is in the xdist group "pipeline", so the session starts once, in one
worker. Each test has its own database (`db_url`) and directories; JDBC reaches the test server
over TCP or, for the embedded server, over its unix socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from app.pipeline.progress import Progress, quiet_progress
from app.pipeline.session import SparkOptions, start_session


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
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
