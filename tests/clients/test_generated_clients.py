"""Clients generated from the committed openapi/openapi.json, used as a user would use them: a
Python client (openapi-python-client) and a TypeScript one (openapi-typescript's types with
openapi-fetch), each generated into a temporary directory, and a short worker written with each
(python_worker.py, ts/worker.ts) run against the served app. The TypeScript worker must first
type-check with `tsc --strict`. `make test` installs the tools (the dev extra; `make node-deps`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sqs.harness import SqsServer

HERE = Path(__file__).resolve().parent
DOCUMENT = HERE.parents[1] / "openapi" / "openapi.json"
TS = HERE / "ts"
BIN = Path(sys.executable).parent
QUEUE = "jobs.fifo"


@pytest.fixture
def server(db_url: str) -> Iterator[SqsServer]:
    with SqsServer(db_url) as served:
        yield served


def run(command: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a tool; its output, after checking it succeeded."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{command[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def worker_env(server: SqsServer, **more: str) -> dict[str, str]:
    key = server.key("*:*").bearer
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "PQS_URL": server.url, "PQS_KEY": key,
            "PQS_QUEUE": QUEUE, **more}  # fmt: skip


def check(summary: dict[str, Any]) -> None:
    """What both workers did, as they report it."""
    assert summary["created"] == [201], "create_queue with no body creates a queue with the defaults"
    assert (summary["dlq"], summary["duplicate"], summary["batchFailed"]) == ("jobs-dlq.fifo", False, [])
    assert summary["received"] == ["a:1", "a:2", "b:3"]
    assert summary["failed"] == [], "ack, nack and change_visibility took effect"
    # a:1 acked, a:2 nacked for a minute (and its group waits for it), b:3 visible again at once.
    assert summary["again"] == ["b:3"]
    assert (summary["notFound"], summary["unauthorized"]) == ("queue_not_found", "unauthorized")


def test_python_client(server: SqsServer, tmp_path: Path) -> None:
    generator = BIN / "openapi-python-client"
    if not generator.exists():
        pytest.fail("openapi-python-client is missing: run `make test` (it installs the dev extra)")
    # With the venv on PATH, so that the generator's own post-hooks (ruff) run.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = run([generator, "generate", "--path", DOCUMENT, "--meta", "none", "--output-path", "pqs_client"],
              cwd=tmp_path, env=env)  # fmt: skip
    assert "warning" not in out.lower(), f"the generator could not use all of the document:\n{out}"
    stdout = run(
        [sys.executable, HERE / "python_worker.py"], cwd=tmp_path, env=worker_env(server, PYTHONPATH=str(tmp_path))
    )
    check(json.loads(stdout))


def test_typescript_client(server: SqsServer, tmp_path: Path) -> None:
    node, bin_ = shutil.which("node"), TS / "node_modules" / ".bin"
    if node is None or not (bin_ / "tsc").exists() or not (bin_ / "openapi-typescript").exists():
        pytest.fail("Node.js or the TypeScript client's packages are missing: run `make node-deps`")
    for name in ("worker.ts", "tsconfig.json"):
        shutil.copy(TS / name, tmp_path / name)
    (tmp_path / "package.json").write_text('{"type": "module"}\n')
    (tmp_path / "node_modules").symlink_to(TS / "node_modules")
    run([bin_ / "openapi-typescript", DOCUMENT, "--output", "schema.d.ts"], cwd=tmp_path)
    # Type-checked strictly, with the generator's default flags, as it compiles: the worker must
    # compile. One run does both: tsc exits non-zero on any type error, even when it writes out/.
    run([bin_ / "tsc", "--project", ".", "--strict"], cwd=tmp_path)
    stdout = run([node, "out/worker.js"], cwd=tmp_path, env=worker_env(server))
    check(json.loads(stdout))


README = HERE.parents[1] / "README.md"


def _fenced(text: str, language: str) -> list[str]:
    """The non-blank lines of the README's code blocks in `language`, in its "From your language"
    section."""
    section = text.split("## From your language", 1)[1].split("\n## ", 1)[0]
    lines: list[str] = []
    for block in section.split(f"```{language}\n")[1:]:
        lines += [line for line in block.split("```", 1)[0].splitlines() if line.strip()]
    return lines


@pytest.mark.parametrize(("language", "worker"), [("python", HERE / "python_worker.py"), ("ts", TS / "worker.ts")])
def test_the_readme_quotes_the_workers_this_suite_runs(language: str, worker: Path) -> None:
    """The README's examples are lines of the workers above, as they are: they run in this suite."""
    quoted = _fenced(README.read_text(), language)
    assert quoted, f"the README quotes no {language} worker"
    source = set(worker.read_text().splitlines())
    assert [line for line in quoted if line not in source] == []
