"""`pqs bench` end to end in a tiny shape: a fresh database on the test server, a real `pqs serve`
subprocess, every scenario for a second or so, and a JSON report that adds up."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
from rich.console import Console

from app.bench.config import SCENARIOS, BenchConfig
from app.bench.runner import run


def tiny(tmp_path: Path, server_url: str, **overrides: object) -> BenchConfig:
    """Every scenario at toy size: about 20 seconds in all."""
    values: dict[str, object] = {
        "scenarios": SCENARIOS,
        "clients": 4,
        "duration": 1.0,
        "workers": 1,
        "database_url": server_url,
        "data_dir": tmp_path,
        "output": tmp_path / "bench.json",
        "baseline_clients": (4,),
        "send_batches": (1, 10),
        "consume_kinds": ("fifo", "standard"),
        "groups": 20,
        "backlog": 400,
        "wake_waiters": 3,
        "wake_samples": 10,
        "wake_interval": 0.02,
        "backlog_sizes": (200, 2_000),
        "backlog_kinds": ("fifo",),
        "backlog_seconds": 0.5,
        "fairness_big": 1_000,
        "fairness_groups": 20,
        "soak_minutes": 0.04,
        "soak_interval": 1.0,
        "soak_rate": 200,
    }
    values.update(overrides)
    return BenchConfig(**values)  # type: ignore[arg-type]


def test_every_scenario_runs_and_reports(tmp_path: Path, server_url: str) -> None:
    config = tiny(tmp_path, server_url)
    with (tmp_path / "out.txt").open("w") as out:
        report = run(config, Console(file=out, width=200))

    written = json.loads((tmp_path / "bench.json").read_text())
    assert written["scenarios"] == json.loads(json.dumps(report["scenarios"], default=str))
    assert written["machine"]["cores"] >= 1
    assert written["database"]["fsync"] in ("on", "off") and written["database"]["version"]
    assert written["service"]["started_by_bench"] is True and written["service"]["workers"] == 1
    assert written["baseline"]["runs"][0]["clients"] == 4 and written["baseline"]["runs"][0]["tps"] > 0

    rows = {s["name"]: s for s in written["scenarios"]}
    assert set(rows) == {
        "baseline c=4",
        "send batch=1",
        "send batch=10",
        "consume fifo",
        "consume standard",
        "roundtrip",
        "wake",
        "backlog fifo",
        "fairness",
        "soak",
    }
    for row in rows.values():
        assert row["errors"] == 0, (row["name"], row["last_error"])
        assert row["rss_mb"] and row["rss_mb"] > 10
    for name in ("send batch=1", "send batch=10", "consume fifo", "consume standard", "roundtrip"):
        row = rows[name]
        assert row["messages"] > 0 and row["throughput"] > 0
        assert row["ratio"] > 0
        assert name == "send batch=1" or row["goal"]["met"] in (True, False)
        assert {"generator", "service"} <= set(row["cpu_percent"])
        latency = row["latency_ms"][row["primary"]]
        assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    assert rows["consume standard"]["extra"]["drained"] is True
    assert rows["wake"]["latency_ms"]["wake"]["count"] == 10 and rows["wake"]["extra"]["not_received"] == 0
    sizes = rows["backlog fifo"]["extra"]["sizes"]
    assert [s["size"] for s in sizes] == [200, 2_000] and rows["backlog fifo"]["extra"]["p99_ratio"] > 0
    fairness = rows["fairness"]["extra"]
    assert fairness["small_groups_finished"] and fairness["small_acked"] == 20 * 10
    assert 0 <= fairness["big_fraction"] < 1
    series = rows["soak"]["extra"]["series"]
    assert len(series) >= 2 and series[-1]["rss_mb"] > 10 and "messages" in series[-1]["tuples"]
    assert "send batch=10" in (tmp_path / "out.txt").read_text()

    # The run's database is gone and no service is left behind.
    with psycopg.connect(server_url, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'pqs\\_bench\\_%'").fetchone()
    assert left == (0,)
