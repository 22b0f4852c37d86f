"""Resident memory and CPU time of the processes under test (the service's process tree, the
PostgreSQL server's) and of the load generator itself, read through psutil."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


@dataclass(frozen=True)
class ProcessTree:
    """A process and its descendants (uvicorn's supervisor and workers; the postmaster and its
    backends), looked up again at each reading so new children count."""

    pid: int

    def rss_mb(self) -> float | None:
        """Sum of VmRSS over the tree, in MiB; None when the process is gone."""
        total = 0
        procs = _tree(self.pid)
        for proc in procs:
            try:
                total += int(proc.memory_info().rss)
            except psutil.Error:
                continue
        return total / 2**20 if procs else None

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the processes alive now, plus those of the children they
        have reaped (short-lived PostgreSQL backends, pgbench's connections)."""
        total = 0.0
        for proc in _tree(self.pid):
            try:
                times = proc.cpu_times()
                total += float(times.user + times.system + times.children_user + times.children_system)
            except psutil.Error:
                continue
        return total

    def worker_pids(self) -> list[int]:
        """Pids of the tree, root first."""
        return [p.pid for p in _tree(self.pid)]


def spark_cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of this process's tree, reaped children included, split into Spark's
    JVM (`jvm`: a local session's driver and executors) and the rest (`python`: this process
    and Spark's Python workers). The children a JVM has reaped are Python's: its only children
    are PySpark's worker daemon and workers, and when one of them exits its CPU moves into the
    JVM's children's times; counted as the JVM's, it would leave Python and show as a negative
    Python figure for the step in which the worker ended."""
    split = {"jvm": 0.0, "python": 0.0}
    for proc in _tree(os.getpid()):
        try:
            times = proc.cpu_times()
            java = proc.name() == "java"
        except psutil.Error:
            continue
        reaped = float(times.children_user + times.children_system)
        split["jvm" if java else "python"] += float(times.user + times.system)
        split["python"] += reaped
    return split


def own_cpu_seconds() -> float:
    """CPU seconds of this process (the load generator) so far."""
    times = os.times()
    return times.user + times.system


def listening_pid(port: int) -> int | None:
    """The topmost local process listening on 127.0.0.1:`port` (for a service the bench did not
    start); None when it cannot be seen."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    pids = {c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid}
    for pid in sorted(pids):
        try:
            if psutil.Process(pid).ppid() not in pids:
                return int(pid)
        except psutil.Error:
            continue
    return None


def postmaster_pid(backend_pid: int) -> int | None:
    """The postmaster that forked this backend, when the server runs on this machine."""
    try:
        backend = psutil.Process(backend_pid)
        if "postgres" not in backend.name() and not any("postgres" in part for part in backend.cmdline()[:1]):
            return None
        return int(backend.ppid())
    except psutil.Error:
        return None


@dataclass
class CpuMeter:
    """CPU use of the generator, the service and PostgreSQL over one scenario, in % of one core."""

    service: ProcessTree | None
    postgres: ProcessTree | None

    def start(self) -> tuple[float, float, float, float]:
        """A reading to pass to `since`."""
        return (
            time.perf_counter(),
            own_cpu_seconds(),
            self.service.cpu_seconds() if self.service else 0.0,
            self.postgres.cpu_seconds() if self.postgres else 0.0,
        )

    def since(self, start: tuple[float, float, float, float]) -> dict[str, float]:
        """% of one core each used since `start` (the machine has os.cpu_count() of them)."""
        wall, gen, svc, pg = start
        elapsed = max(time.perf_counter() - wall, 1e-6)
        result = {"generator": round(100 * (own_cpu_seconds() - gen) / elapsed, 1)}
        if self.service:
            result["service"] = round(100 * (self.service.cpu_seconds() - svc) / elapsed, 1)
        if self.postgres:
            result["postgres"] = round(100 * (self.postgres.cpu_seconds() - pg) / elapsed, 1)
        return result
