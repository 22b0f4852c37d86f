"""The data pipeline on Spark (PySpark): history archive, SLO report, exactly-once backfill.

Driven by `pqs pipeline ...`; needs the `pipeline` extra (`pip install -e '.[pipeline]'`), Java 17
and the PostgreSQL JDBC driver. The web service never imports this package.

- session.py   the SparkSession: master, driver jars, light settings, the JVM's stderr filtered
- jdbc.py      libpq URL -> JDBC URL (TCP, or a unix socket through junixsocket); partitioned
               reads (the report's --from-database)
- progress.py  progress in a run's named steps, counted up front: rows, rows/s, time elapsed
- exports.py   the archive's bookkeeping in PostgreSQL: horizon, batches (the watermark), prune
- archive.py   `pqs pipeline archive`: history -> Parquet by queue and day, then optionally prune
- archive_files.py  an archive task: its id range read with ADBC, written with pyarrow
- report.py    `pqs pipeline report`: per-queue and per-group SLO figures (render.py writes them)
- backfill/    `pqs pipeline backfill`: files -> messages, through the API's enqueue path
- cli.py       the `pqs pipeline` commands
"""
