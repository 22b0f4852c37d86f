"""A real `pqs serve` with a one-connection pool keeps serving after a rolled-back transaction
(issue 18): the exact sequence that used to end in 500s on every receive.

Why the sequence reached the bug (before app.db.prepared became the one owner of the pooled
connections' prepared statements): every request runs on the pool's one connection. The send
prepared `pqs_message_send_fenced` there. A GET of a queue ran its statements through psycopg,
which prepares a statement of its own on its sixth run on a connection (prepare_threshold 5):
seven GETs are enough, whatever the time between them. The conflicting PUT rolled its transaction
back, and psycopg, holding prepared statements, ended the rollback with `DEALLOCATE ALL`,
dropping ours too. The receive then prepared `pqs_message_receive_standard` afresh; the next send
found its statement gone ("does not exist"), and app.db.prepared, taking that for "everything is
gone", forgot every name it had, the receive statement it had just prepared again included.
Every receive after that tried to prepare a statement the connection still had: `already
exists`, 500, until the next rollback.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from app.access import EVERYTHING
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.service import pqs_serve

pytestmark = pytest.mark.xdist_group("faults")


async def test_receive_keeps_working_after_a_conflicting_put_rolls_back(db_url: str, tmp_path: Path) -> None:
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "prepared", EVERYTHING))
    env = {"PQS_DATA_DIR": str(tmp_path), "PQS_POOL_MIN_SIZE": "1", "PQS_POOL_MAX_SIZE": "1"}
    with pqs_serve(db_url, tmp_path / "serve.log", **env) as service:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=15) as client:
            answers: list[tuple[str, int]] = []

            async def call(what: str, method: str, path: str, body: object = None) -> httpx.Response:
                response = await client.request(method, path, json=body)
                answers.append((what, response.status_code))
                return response

            queue = "/v1/queues/jobs"
            await call("create", "PUT", queue, {})
            await call("send", "POST", f"{queue}/messages", {"body": {"n": 1}})
            for _ in range(7):
                await call("get", "GET", queue)
            await call("conflicting put", "PUT", queue, {"visibility_timeout": 5})
            await call("receive", "POST", f"{queue}/messages/receive", {"wait_seconds": 0})
            await call("send", "POST", f"{queue}/messages", {"body": {"n": 2}})
            for _ in range(3):
                await call("receive", "POST", f"{queue}/messages/receive", {"wait_seconds": 0})
        expected = [("create", 201), ("send", 201), *[("get", 200)] * 7, ("conflicting put", 409)]
        expected += [("receive", 200), ("send", 201), *[("receive", 200)] * 3]
        assert answers == expected, service.output()
