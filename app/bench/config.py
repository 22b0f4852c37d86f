"""What a bench run does: the scenarios, their shapes, and the `--quick` variant of each."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

SCENARIOS = ("baseline", "send", "consume", "roundtrip", "wake", "backlog", "fairness", "soak")
STANDARD_SET = ("baseline", "send", "consume", "roundtrip", "wake", "backlog", "fairness")
# The Spark pipeline's figures (app/bench/pipeline.py): no HTTP service, so it runs on its own.
PIPELINE = "pipeline"
KINDS = ("fifo", "standard")
HTTP_CLIENTS = ("lean", "httpx")
# `--api`: the REST API, the SQS endpoint (send and consume only), or both in one run.
APIS = {"rest": ("rest",), "sqs": ("sqs",), "both": ("rest", "sqs")}


@dataclass(frozen=True)
class BenchConfig:
    """Every knob of a run; the CLI fills it, tests build small ones directly."""

    scenarios: tuple[str, ...] = STANDARD_SET
    clients: int = 16
    duration: float = 10.0
    workers: int = 1
    url: str | None = None
    database_url: str | None = None
    data_dir: Path = Path(".pqs/bench")
    output: Path | None = Path("bench-results.json")
    baseline_clients: tuple[int, ...] = (16,)
    body_bytes: int = 100
    http: str = "lean"
    apis: tuple[str, ...] = ("rest",)
    rounds: int = 1  # send, consume: each shape this many times through each API, in turn
    # send
    send_batches: tuple[int, ...] = (1, 10, 1000)
    send_kind: str = "standard"
    # consume
    consume_kinds: tuple[str, ...] = ("fifo", "standard")
    groups: int = 1000
    backlog: int = 100_000
    receive_batch: int = 10
    # roundtrip
    roundtrip_kind: str = "standard"
    # wake
    wake_waiters: int = 10
    wake_samples: int = 200
    wake_interval: float = 0.05
    # backlog
    backlog_sizes: tuple[int, ...] = (10_000, 1_000_000)
    backlog_kinds: tuple[str, ...] = ("fifo", "standard")
    backlog_clients: int = 2
    backlog_seconds: float = 5.0
    # fairness
    fairness_big: int = 100_000
    fairness_groups: int = 1000
    fairness_group_size: int = 10
    # soak
    soak_minutes: float = 5.0
    soak_interval: float = 10.0
    soak_rate: int = 500
    quick: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def ratio_clients(self) -> int:
        """The baseline client count every throughput is quoted against."""
        return self.clients

    def all_baseline_clients(self) -> tuple[int, ...]:
        """The baseline client counts to run: the asked ones plus the scenarios' own."""
        return tuple(sorted({*self.baseline_clients, self.clients}))


def quick(config: BenchConfig) -> BenchConfig:
    """The same run shrunk to a smoke test of about a minute."""
    return replace(
        config,
        duration=min(config.duration, 3.0),
        backlog=min(config.backlog, 10_000),
        groups=min(config.groups, 200),
        wake_samples=min(config.wake_samples, 40),
        backlog_sizes=tuple(sorted({min(s, 100_000) for s in config.backlog_sizes})),
        backlog_seconds=min(config.backlog_seconds, 2.0),
        fairness_big=min(config.fairness_big, 10_000),
        fairness_groups=min(config.fairness_groups, 100),
        soak_minutes=min(config.soak_minutes, 0.5),
        soak_interval=min(config.soak_interval, 5.0),
        quick=True,
    )


def parse_ints(text: str) -> tuple[int, ...]:
    """'1,4,16' -> (1, 4, 16); underscores and k/M suffixes allowed ('10k', '1M')."""
    values = []
    for part in text.split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        scale = 1
        if part[-1] in "kK":
            scale, part = 1_000, part[:-1]
        elif part[-1] in "mM":
            scale, part = 1_000_000, part[:-1]
        values.append(int(float(part) * scale))
    if not values or any(v < 1 for v in values):
        raise ValueError(f"expected positive integers separated by commas, got {text!r}")
    return tuple(values)
