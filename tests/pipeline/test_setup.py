"""The pipeline's set-up: JDBC URLs from libpq URLs (TCP and unix socket), the driver jars, the
SQL blocks, and the web service never importing the pipeline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict
from pyspark.sql import SparkSession

from app.pipeline import session
from app.pipeline.exports import SQL
from app.pipeline.jdbc import UNIX_SOCKET_FACTORY, jdbc_for, jdbc_source
from app.pipeline.session import PipelineError, jdbc_jar, junixsocket_jar

pytestmark = pytest.mark.xdist_group("pipeline")
ROOT = Path(__file__).resolve().parents[2]


def test_a_tcp_server_is_reached_directly() -> None:
    source = jdbc_for("db.example", 6432, "pqs prod", "app", "s3cret", "require")

    assert source.url == "jdbc:postgresql://db.example:6432/pqs%20prod" and source.unix_socket is None
    assert source.properties == {
        "driver": "org.postgresql.Driver",
        "user": "app",
        "password": "s3cret",
        "sslmode": "require",
        "ApplicationName": "pqs-pipeline",
    }
    assert "s3cret" not in repr(source)
    assert jdbc_for("::1", 5432, "pqs", "app", None).url == "jdbc:postgresql://[::1]:5432/pqs"


def test_a_unix_socket_goes_through_junixsocket() -> None:
    source = jdbc_for("/run/pqs/sock", 5432, "pqs", "postgres", None)

    assert source.url == "jdbc:postgresql://localhost:5432/pqs"
    assert source.properties["socketFactory"] == UNIX_SOCKET_FACTORY
    assert source.properties["socketFactoryArg"] == "/run/pqs/sock/.s.PGSQL.5432"


def test_a_unix_socket_without_junixsocket_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "DEBIAN_JUNIXSOCKET_JAR", Path("/nonexistent.jar"))
    monkeypatch.delenv("PQS_JUNIXSOCKET_JAR", raising=False)
    assert junixsocket_jar() is None
    with pytest.raises(PipelineError, match="apt-get install -y libjunixsocket-java"):
        jdbc_for("/run/pqs/sock", 5432, "pqs", "postgres", None)


def test_the_test_server_is_reachable_through_jdbc(spark: SparkSession, db_url: str) -> None:
    source = jdbc_source(db_url)
    rows = source.reader(spark).option("query", "SELECT current_database() AS db, 1 + 1 AS two").load().collect()

    assert rows[0]["two"] == 2 and rows[0]["db"] == conninfo_to_dict(db_url)["dbname"]


def test_the_driver_jar_comes_from_debian_or_pqs_jdbc_jar(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    jar = tmp_path / "driver.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("PQS_JDBC_JAR", str(jar))
    assert jdbc_jar() == jar
    monkeypatch.setenv("PQS_JDBC_JAR", str(tmp_path / "missing.jar"))
    with pytest.raises(PipelineError, match=r"PQS_JDBC_JAR=.*missing\.jar is not a file"):
        jdbc_jar()
    monkeypatch.delenv("PQS_JDBC_JAR")
    monkeypatch.setattr(session, "DEBIAN_JDBC_JAR", tmp_path / "none.jar")
    with pytest.raises(PipelineError, match="apt-get install -y libpostgresql-jdbc-java"):
        jdbc_jar()


def test_every_pipeline_sql_block_has_a_description() -> None:
    assert {"history_last_id", "history_writers", "export_begin", "export_prune", "backfill_keys_new"} <= set(SQL)
    for query in SQL.values():
        assert query.description and query.text.strip()


def test_the_web_service_and_the_pqs_command_do_not_import_the_pipeline() -> None:
    code = (
        "import sys, app.main, app.cli; app.main.create_app; "
        "print(sorted(m for m in sys.modules if m.startswith(('app.pipeline', 'pyspark', 'py4j', 'matplotlib'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_local_session_runs_the_throughput_collector(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {beans.get(i).getName() for i in range(beans.size())}

    assert names == {"PS Scavenge", "PS MarkSweep"}
    # On a cluster the executors' JVMs are the cluster's to tune: the driver keeps its default.
    remote = session.session_conf(session.SparkOptions(master="spark://spark.example:7077"))
    assert "UseParallelGC" not in remote["spark.driver.extraJavaOptions"]
