"""The SparkSession of a pipeline run: the master, the JDBC driver jars, and light settings.

The jobs take a SparkSession and never look at the master: `local[*]` (the default) and a
cluster's master run the same code. What differs is only where things are: on a cluster the
executors need Python with this package installed (see README, "The pipeline on a cluster") and
reach PostgreSQL over TCP.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
# Debian's packages: libpostgresql-jdbc-java and libjunixsocket-java.
DEBIAN_JDBC_JAR = Path("/usr/share/java/postgresql.jar")
DEBIAN_JUNIXSOCKET_JAR = Path("/usr/share/java/junixsocket-common.jar")
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
# Lines the driver's JVM writes to stderr that are dropped (see start_session): Spark's launcher
# adds the incubating Vector API module to every JVM it starts (its JavaModuleOptions), and the
# JVM then says so on every start, whatever the logging settings; no JVM option turns that off.
JVM_NOISE = frozenset({"WARNING: Using incubator modules: jdk.incubator.vector"})


class PipelineError(Exception):
    """A pipeline run cannot go on; the message says why and what to do about it."""


def jdbc_jar() -> Path:
    """The PostgreSQL JDBC driver: PQS_JDBC_JAR, else Debian's libpostgresql-jdbc-java."""
    override = os.environ.get("PQS_JDBC_JAR")
    if override:
        if not Path(override).is_file():
            raise PipelineError(f"PQS_JDBC_JAR={override} is not a file")
        return Path(override)
    if DEBIAN_JDBC_JAR.is_file():
        return DEBIAN_JDBC_JAR
    raise PipelineError(
        f"the PostgreSQL JDBC driver was not found at {DEBIAN_JDBC_JAR}: install it with "
        "`apt-get install -y libpostgresql-jdbc-java`, or set PQS_JDBC_JAR to the driver's jar"
    )


def junixsocket_jar() -> Path | None:
    """junixsocket (JDBC over a unix socket): PQS_JUNIXSOCKET_JAR, else Debian's, else None."""
    override = os.environ.get("PQS_JUNIXSOCKET_JAR")
    if override:
        if not Path(override).is_file():
            raise PipelineError(f"PQS_JUNIXSOCKET_JAR={override} is not a file")
        return Path(override)
    return DEBIAN_JUNIXSOCKET_JAR if DEBIAN_JUNIXSOCKET_JAR.is_file() else None


def check_java() -> None:
    """Spark needs a Java runtime (17 or later)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java") is None:
        raise PipelineError("Spark needs Java 17: `apt-get install -y openjdk-17-jre-headless` (or set JAVA_HOME)")


def is_local(master: str) -> bool:
    """Whether the executors run inside the driver's JVM on this machine."""
    return master == "local" or master.startswith("local[")


@dataclass(frozen=True)
class SparkOptions:
    """How to start Spark for a pipeline run."""

    master: str = DEFAULT_MASTER
    app_name: str = "pqs-pipeline"
    driver_memory: str = "2g"
    shuffle_partitions: int = 16
    ui: bool = False
    conf: Mapping[str, str] = field(default_factory=dict)


def session_conf(options: SparkOptions) -> dict[str, str]:
    """Every setting the session starts with (the caller's `conf` wins)."""
    jars = [jdbc_jar()]
    unix = junixsocket_jar()
    if unix is not None:
        jars.append(unix)
    conf = {
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.driver.memory": options.driver_memory,
        "spark.sql.shuffle.partitions": str(options.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "true" if options.ui else "false",
        # progress.py shows progress; Spark's own bar would fight with it on the terminal
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}",
    }
    if is_local(options.master):
        # The driver's JVM is the only executor: a throughput collector instead of G1, whose
        # concurrent threads and write barriers cost a batch job on few cores CPU that the
        # database needs. Measured, `pqs bench pipeline --history-rows 100k`, FIFO backfill of
        # 1M rows, back to back: 20.0-23.2 s with G1, 18.8-20.4 s with ParallelGC; the JVM's
        # CPU in a cold backfill 14.9-15.5 s against 12.4-14.0 s.
        conf["spark.driver.extraJavaOptions"] += " -XX:+UseParallelGC"
        # Executors are this machine's processes: bind to loopback.
        conf["spark.driver.bindAddress"] = "127.0.0.1"
        conf["spark.driver.host"] = "127.0.0.1"
    conf.update(options.conf)
    return conf


def start_session(options: SparkOptions) -> SparkSession:
    """A SparkSession with `options` (Spark allows one per process: an existing one is reused)."""
    check_java()
    conf = session_conf(options)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise PipelineError("PySpark is not installed: pip install -e '.[pipeline]'") from None
    if is_local(options.master):
        # Python workers run this interpreter (this package and its dependencies installed),
        # unless PYSPARK_PYTHON says otherwise; PySpark reads the variable, not a setting.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    launch_quiet_gateway(options.master, options.app_name, conf)
    builder = SparkSession.builder.master(options.master).appName(options.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def launch_quiet_gateway(master: str, app_name: str, conf: Mapping[str, str]) -> None:
    """Start the driver's JVM (PySpark's gateway, once per process) with its stderr passed on line
    by line but for JVM_NOISE: its warnings, errors and a failed start still show, on this
    process's stderr, where a progress bar on the terminal keeps them above itself."""
    from pyspark import SparkConf, SparkContext
    from pyspark.errors import PySparkRuntimeError
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    # The JVM's own settings (memory, Java options, jars) are arguments of its start.
    launch_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name).setAll(list(conf.items()))
    # A pipe of our own, read from before the JVM starts: what a JVM that fails to start says is
    # shown too, and a JVM that says much never waits on a full pipe.
    read_end, write_end = os.pipe()
    relay = threading.Thread(target=relay_stderr, args=(os.fdopen(read_end, "rb"),), name="jvm-stderr", daemon=True)
    relay.start()
    with SparkContext._lock:
        try:
            gateway = launch_gateway(launch_conf, popen_kwargs={"stderr": write_end})  # type: ignore[no-untyped-call]
        except PySparkRuntimeError as exc:
            failure: PySparkRuntimeError | None = exc
        else:
            failure = None
        finally:
            os.close(write_end)  # the JVM (and the Python workers it starts) hold their own copies
        if failure is not None:
            relay.join(timeout=5)  # the JVM has exited: its last words come before ours
            raise PipelineError(f"the Spark driver's JVM did not start (its messages are above): {failure}")
        SparkContext._ensure_initialized(gateway=gateway)


def relay_stderr(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours until it closes, without the lines of JVM_NOISE."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if line.rstrip("\r\n") in JVM_NOISE:
            continue
        sys.stderr.write(line)
        sys.stderr.flush()


@contextmanager
def spark_session(options: SparkOptions) -> Iterator[SparkSession]:
    """A SparkSession for the duration of a command, stopped afterwards; a session that was
    already running (a caller's, or a test's) is used as it is and left running."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise PipelineError("PySpark is not installed: pip install -e '.[pipeline]'") from None
    running = SparkSession.getActiveSession()
    if running is not None:
        yield running
        return
    spark = start_session(options)
    try:
        yield spark
    finally:
        spark.stop()
