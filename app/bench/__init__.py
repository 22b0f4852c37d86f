"""`pqs bench`: a load generator and report for the PQS HTTP API, measured against the database's
own single-row INSERT commit rate (the baseline) in the same run.

Modules
- config      BenchConfig: what to run and how big (and the `--quick` shapes).
- target      the database (embedded or given), a fresh database per run, the service under test.
- baseline    pgbench (or a psycopg loop) INSERT commit rate at the scenarios' client counts.
- client      the HTTP load generator: pre-encoded bodies, latency samples, bounded loops.
- preload     backlogs written straight into `messages` / `message_groups` with SQL.
- scenarios   send, consume, roundtrip; latency.py: wake, backlog, fairness; soak.py: soak.
- report      results, targets met or missed, the rich table and the JSON file.
- runner      runs the chosen scenarios in order with a progress display.

The web app never imports this package; `app.cli` imports it inside the `bench` command.
"""
