"""PostgreSQL through Spark's JDBC source, from the libpq URL the rest of PQS uses.

A TCP URL maps to `jdbc:postgresql://host:port/db` as it is. A unix-socket URL (the embedded
server listens on one only: `postgresql://postgres:@/db?host=/path/to/socketdir`) goes through
junixsocket's socket factory (Debian's libjunixsocket-java), which the PostgreSQL driver loads
by name: no TCP listener is needed, and the embedded server's settings stay as they are. That
works wherever the socket is, so on this machine; executors on other machines need a TCP URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from app.pipeline.session import PipelineError, junixsocket_jar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession

DRIVER = "org.postgresql.Driver"
UNIX_SOCKET_FACTORY = "org.newsclub.net.unix.AFUNIXSocketFactory$FactoryArg"
FETCH_SIZE = 10_000


@dataclass(frozen=True)
class JdbcSource:
    """Where Spark's JDBC source reads from: a JDBC URL and the driver's connection properties."""

    url: str
    properties: dict[str, str] = field(repr=False)
    unix_socket: str | None = None

    def reader(self, spark: SparkSession) -> DataFrameReader:
        """A JDBC reader on this database (add `dbtable` or `query`)."""
        reader = spark.read.format("jdbc").option("url", self.url)
        for key, value in self.properties.items():
            reader = reader.option(key, value)
        return reader


def jdbc_source(database_url: str) -> JdbcSource:
    """The JDBC form of a libpq URL. Host, port and user are resolved by libpq itself (defaults
    and PG* variables included) by connecting once."""
    try:
        with psycopg.connect(database_url, connect_timeout=10) as conn:
            info = conn.info
            host, port, dbname, user, password = info.host, info.port, info.dbname, info.user, info.password
    except psycopg.Error as exc:
        raise PipelineError(f"cannot connect to the database: {exc}".strip()) from None
    sslmode = conninfo_to_dict(database_url).get("sslmode")
    return jdbc_for(host, port, dbname, user, password, None if sslmode is None else str(sslmode))


def jdbc_for(
    host: str, port: int, dbname: str, user: str, password: str | None, sslmode: str | None = None
) -> JdbcSource:
    """The JDBC URL and properties for a server at `host` (a directory: its unix socket)."""
    properties = {"driver": DRIVER, "user": user, "ApplicationName": "pqs-pipeline"}
    if password:
        properties["password"] = password
    if sslmode:
        properties["sslmode"] = sslmode
    path = "/" + quote(dbname, safe="")
    if host.startswith("/"):
        if junixsocket_jar() is None:
            raise PipelineError(
                f"the database listens on a unix socket ({host}) and JDBC needs junixsocket for that: "
                "`apt-get install -y libjunixsocket-java` (or set PQS_JUNIXSOCKET_JAR), or give a TCP URL"
            )
        socket = f"{host}/.s.PGSQL.{port}"
        properties["socketFactory"] = UNIX_SOCKET_FACTORY
        properties["socketFactoryArg"] = socket
        return JdbcSource(f"jdbc:postgresql://localhost:{port}{path}", properties, socket)
    netloc = f"[{host}]" if ":" in host else host
    return JdbcSource(f"jdbc:postgresql://{netloc}:{port}{path}", properties)


def read_partitioned(
    spark: SparkSession, source: JdbcSource, query: str, column: str, lower: int, upper: int, partitions: int
) -> DataFrame:
    """Rows of `query` read by `partitions` tasks in parallel, each one range of the integer
    `column` between `lower` (inclusive) and `upper` (exclusive), through its index.

    The rows come in PostgreSQL's binary format (`prepareThreshold=-1`: the driver describes
    the statement first and asks for binary columns wherever it decodes them, timestamps and
    integers among them). A timestamp is then 8 bytes of microseconds that neither side turns
    into text and back: the driver's parsing of text timestamps was about half of a history read's
    JVM CPU, their formatting a fifth of PostgreSQL's (docs/performance.md). Text columns
    (text, and uuid, enum, jsonb cast to text) stay text."""
    return (
        source.reader(spark)
        .option("prepareThreshold", "-1")
        .option("dbtable", f"({query}) AS q")
        .option("partitionColumn", column)
        .option("lowerBound", str(lower))
        .option("upperBound", str(max(upper, lower + 1)))
        .option("numPartitions", str(max(1, partitions)))
        .option("fetchsize", str(FETCH_SIZE))
        .load()
    )
