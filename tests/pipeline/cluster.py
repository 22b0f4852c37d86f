"""A Spark standalone cluster of the test's own: a master and one worker started from the installed
PySpark (its `bin/spark-class`), on 127.0.0.1, small, killed on the way out. The recipe is
docs/pipeline.md's "On a cluster"."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.faults.service import free_port

READY_SECONDS = 90


@dataclass(frozen=True)
class Cluster:
    """A master and one worker, started."""

    master: str  # spark://127.0.0.1:<port>
    work_dir: Path  # the worker's: a directory per application, one per executor in it
    ui: str
    daemons: tuple[subprocess.Popen[bytes], ...]
    logs: Path

    def wait_for_worker(self) -> None:
        """Return once the worker has registered with the master (within READY_SECONDS)."""
        deadline = time.monotonic() + READY_SECONDS
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                for proc in self.daemons:
                    assert proc.poll() is None, "a Spark daemon exited:\n" + "\n".join(
                        p.read_text(errors="replace")[-2000:] for p in self.logs.glob("*.log")
                    )
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    if client.get(f"{self.ui}/json/").json().get("aliveworkers", 0) >= 1:
                        return
                time.sleep(0.5)
        raise AssertionError(f"no worker registered with the master within {READY_SECONDS} s")


def spark_class() -> Path:
    """`bin/spark-class` of the installed PySpark."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _daemon(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        # A session of its own: its process group (the JVM and, for the worker, its executors)
        # is killed as one.
        return subprocess.Popen(
            [str(spark_class()), *args], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
        )  # fmt: skip


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the group (a worker then stops its executors), SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # executors left behind by a worker that died first


@contextlib.contextmanager
def standalone_cluster(root: Path, *, cores: int = 1, memory: str = "1g") -> Iterator[Cluster]:
    """A master and a worker (`cores`, `memory` for its executors) on 127.0.0.1, starting (see
    Cluster.wait_for_worker); their logs and the worker's directory under `root`."""
    port, ui, worker_ui = free_port(), free_port(), free_port()
    work_dir = root / "work"
    work_dir.mkdir(parents=True)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        # the master's and the worker's own JVMs (their Java options: SPARK_DAEMON_JAVA_OPTS,
        # which tests/pipeline/conftest.py sets)
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOG_DIR": str(root),
        "SPARK_LOCAL_DIRS": str(root / "local"),
    }
    master_url = f"spark://127.0.0.1:{port}"
    master = _daemon(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)],
        root / "master.log",
        env,
    )  # fmt: skip
    worker = None
    try:
        worker = _daemon(
            ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(cores),
             "--memory", memory, "--webui-port", str(worker_ui), "--work-dir", str(work_dir), master_url],
            root / "worker.log",
            env,
        )  # fmt: skip
        yield Cluster(master_url, work_dir, f"http://127.0.0.1:{ui}", (master, worker), root)
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
