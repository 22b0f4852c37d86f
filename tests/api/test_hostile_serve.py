"""Hostile input over real sockets to a real `pqs serve`: the hot routes are then answered by the
hot lane (app/api/lane.py), which only runs under uvicorn, and the rest by FastAPI. Each gets a
4xx in the house error shape, nothing changes, and the service logs no unhandled error."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

from app.access import parse_grant
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.conftest import admin_key
from tests.faults.service import pqs_serve

LONG = "n" * 100_000
# uvicorn's HTTP parser refuses a request line of 100,000 characters itself (a plain-text 400,
# before the app); a path this long still reaches the app.
LONG_PATH = "n" * 60_000
HOT = ("", "/batch", "/receive", "/ack", "/nack", "/visibility")


def exchange(port: int, method: str, path: str, key: str, body: Any = None) -> tuple[int, Any]:
    """One request on its own connection (closed by the server after the answer)."""
    data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + data)
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    status_line, _, rest = b"".join(chunks).partition(b"\r\n")
    _, _, content = rest.partition(b"\r\n\r\n")
    return int(status_line.split(b" ")[1]), json.loads(content) if content else None


def refused(answer: tuple[int, Any], status: int = 400) -> str:
    """The answer is `status` with the house error body; its message (at most 300 characters)."""
    got, payload = answer
    assert got == status, payload
    assert set(payload) == {"error"} and set(payload["error"]) == {"code", "message"}, payload
    message: str = payload["error"]["message"]
    assert len(message) <= 300, message[:400]
    return message


def test_hostile_requests_to_pqs_serve_get_4xx_and_change_nothing(db_url: str, tmp_path: Path) -> None:
    admin = admin_key(db_url)
    grants = (parse_grant("other-*:*"),)
    _, other = asyncio.run(on_connection(db_url, lambda conn: create_key(conn, "other queues", grants)))
    log = tmp_path / "serve.log"
    with pqs_serve(db_url, log, PQS_DATA_DIR=str(tmp_path)) as service:
        port = service.port
        for name in ("dlq", "std"):
            assert exchange(port, "PUT", f"/v1/queues/{name}", admin, {})[0] == 201
        assert exchange(port, "POST", "/v1/queues/std/messages", admin, {"body": 1})[0] == 201

        deep = ("[" * 10_000 + "]" * 10_000).encode()
        for suffix in HOT:
            assert "nested too deeply" in refused(
                exchange(port, "POST", f"/v1/queues/std/messages{suffix}", admin, deep)
            )
        for field in ("attempt_id", "consumer_id"):
            refused(exchange(port, "POST", "/v1/queues/std/messages/receive", admin, {field: "a\x00"}))
        refused(exchange(port, "POST", "/v1/queues/std/messages/release", admin, {"consumer_id": "w\x00"}))
        for bad in ("\x00", "\ud800"):
            dead_letter = {"dead_letter": {"queue": "dlq" + bad, "max_receive_count": 3}}
            refused(exchange(port, "PUT", "/v1/queues/fresh", admin, dead_letter))
            refused(exchange(port, "PATCH", "/v1/queues/std", admin, dead_letter))

        cut = f"… ({len(LONG):,} characters)"
        assert cut in refused(
            exchange(port, "POST", "/v1/queues/std/messages", admin, {"body": 1, "attributes": {LONG: "v"}})
        )
        assert cut in refused(exchange(port, "PUT", "/v1/queues/std", admin, {LONG: 1}))
        cut = f"… ({len(LONG_PATH):,} characters)"
        refused(exchange(port, "PUT", f"/v1/queues/{LONG_PATH}", admin, {}))
        assert cut in refused(exchange(port, "PUT", f"/v1/queues/{LONG_PATH}", other, {}), 403)
        assert cut in refused(exchange(port, "POST", f"/v1/queues/{LONG_PATH}/messages", other, {"body": 1}), 403)

        status, listing = exchange(port, "GET", "/v1/queues", admin)
        assert status == 200 and [q["name"] for q in listing["queues"]] == ["dlq", "std"]
        assert all(q["dead_letter"] is None for q in listing["queues"])
        status, std = exchange(port, "GET", "/v1/queues/std", admin)
        assert status == 200 and std["stats"]["visible"] == 1 and std["stats"]["in_flight"] == 0
        output = service.log.read_text(errors="replace")
    assert "Traceback" not in output and "unhandled" not in output, output[-4000:]
