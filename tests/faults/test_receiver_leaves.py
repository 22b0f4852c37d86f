"""Receives whose clients leave, over real sockets, against a real service in each of the three
ways a receive is served: the hot lane (`pqs serve`, the default), FastAPI (`pqs serve` with
PQS_FAST_PATH=false) and the ASGI fast path (the app under plain uvicorn).

Proves: twenty long polls (visibility timeout 600 s, wait 20 s) whose clients close their
connections lease nothing: one send after them goes to a live receiver at once, received for
the first time. A client that leaves while its receive is leasing (held up mid-statement by a
row lock the test holds) is left nothing in flight: the message goes back at once, receive count
as before. And (the lane) a client that leaves while its answer waits for its connection's full
send buffer: the answer is never written, and what it leased goes back at once.

The live receiver waits 5 s: before the fix the message stayed in flight to a departed client
for 600 s, and it got nothing.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from app.access import EVERYTHING
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.load import waiting_on_locks
from tests.faults.service import PLAIN_UVICORN, PQS_SERVE, Service, pqs_serve

pytestmark = pytest.mark.xdist_group("faults")

WAYS = ["lane", "fastapi", "asgi"]
# Lets the server see a request, or a closed connection, before the test goes on.
GAP = 0.3
# A live receive waits this long; the message it must get is in flight for 600 s otherwise.
LIVE_WAIT = 5
LONG_POLL = {"wait_seconds": 20, "visibility_timeout": 600}


def big_messages() -> int:
    """How many messages of about 1 MB make an answer that cannot all leave: more than the
    server's socket send buffer can grow to (the most of net.ipv4.tcp_wmem, 4 MB by default), its
    transport's high-water mark (64 kB) and what the client's small receive buffer takes."""
    wmem = Path("/proc/sys/net/ipv4/tcp_wmem")
    most = int(wmem.read_text().split()[2]) if wmem.exists() else 4 * 1024 * 1024
    return most // 1_000_000 + 2


@contextmanager
def serving(way: str, db_url: str, tmp_path: Path) -> Iterator[Service]:
    """The service on `db_url`, serving receives the `way` named."""
    env = {"PQS_DATA_DIR": str(tmp_path)}
    if way == "fastapi":
        env["PQS_FAST_PATH"] = "false"
    program = PLAIN_UVICORN if way == "asgi" else PQS_SERVE
    with pqs_serve(db_url, tmp_path / "serve.log", program=program, **env) as service:
        yield service


@asynccontextmanager
async def api(service: Service, key: str) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the service, with the key."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=30) as client:
        yield client


def request(path: str, body: dict[str, Any], key: str) -> bytes:
    """A POST with a JSON body, as bytes on the wire."""
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


async def send(client: httpx.AsyncClient, queue: str, body: Any, **fields: Any) -> dict[str, Any]:
    """One send; its answer."""
    response = await client.post(f"/v1/queues/{queue}/messages", json={"body": body, **fields})
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def live_receive(client: httpx.AsyncClient, queue: str) -> list[dict[str, Any]]:
    """What a receive by a client that stays gets within LIVE_WAIT seconds."""
    response = await client.post(f"/v1/queues/{queue}/messages/receive", json={"wait_seconds": LIVE_WAIT})
    assert response.status_code == 200, response.text
    messages: list[dict[str, Any]] = response.json()["messages"]
    return messages


async def new_key(db_url: str) -> str:
    """A key allowing everything (made before the service starts: it makes no admin key then)."""
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "leaves", EVERYTHING))
    return key


async def in_flight(db_url: str, sequence_number: int) -> None:
    """Until the message is in flight (bounded)."""
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for _ in range(400):
            cur = await conn.execute("SELECT state FROM messages WHERE id = %s", (sequence_number,))
            if await cur.fetchone() == ("in_flight",):
                return
            await asyncio.sleep(0.025)
    raise AssertionError("the receive never leased the message")


@pytest.mark.parametrize("way", WAYS)
async def test_long_polls_whose_clients_left_take_nothing(way: str, db_url: str, tmp_path: Path) -> None:
    key = await new_key(db_url)
    with serving(way, db_url, tmp_path) as service:
        async with api(service, key) as client:
            assert (await client.put("/v1/queues/jobs", json={})).status_code == 201
            polls = []
            for _ in range(20):
                reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
                writer.write(request("/v1/queues/jobs/messages/receive", LONG_POLL, key))
                polls.append((reader, writer))
            await asyncio.sleep(GAP)
            for _, writer in polls:
                writer.close()  # the clients give up and go
            await asyncio.sleep(GAP)

            sent = await send(client, "jobs", {"n": 1})
            got = await live_receive(client, "jobs")

    assert [(m["message_id"], m["receive_count"]) for m in got] == [(sent["message_id"], 1)]


@pytest.mark.parametrize("way", WAYS)
async def test_a_client_that_leaves_while_its_receive_leases_is_left_nothing(
    way: str, db_url: str, tmp_path: Path
) -> None:
    key = await new_key(db_url)
    with serving(way, db_url, tmp_path) as service:
        async with api(service, key) as client:
            assert (await client.put("/v1/queues/jobs.fifo", json={"fifo": True})).status_code == 201
            sent = await send(client, "jobs.fifo", {"n": 1}, group_id="g", dedup_id="d1")
            # The receive leases the group, then waits for this lock to put the message in flight.
            async with await psycopg.AsyncConnection.connect(db_url) as lock:
                await lock.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (sent["sequence_number"],))
                _, writer = await asyncio.open_connection("127.0.0.1", service.port)
                writer.write(request("/v1/queues/jobs.fifo/messages/receive", LONG_POLL, key))
                await waiting_on_locks(db_url, 1)
                writer.close()
                await asyncio.sleep(GAP)
                await lock.rollback()

            got = await live_receive(client, "jobs.fifo")

    assert [(m["message_id"], m["receive_count"]) for m in got] == [(sent["message_id"], 1)]


async def test_an_answer_that_cannot_be_written_gives_back_what_it_leased(db_url: str, tmp_path: Path) -> None:
    key = await new_key(db_url)
    with serving("lane", db_url, tmp_path) as service:
        async with api(service, key) as client:
            for name in ("big", "jobs"):
                assert (await client.put(f"/v1/queues/{name}", json={})).status_code == 201
            for n in range(big_messages()):
                await send(client, "big", f"{n:02}" + "x" * 999_990)
            sent = await send(client, "jobs", {"n": 1})

            # One connection, two requests in one write: a receive whose answer (MBs) fills the
            # connection's buffers, the client reading nothing; then the receive under test,
            # which leases and then waits for room to write its answer.
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", service.port))
            _, writer = await asyncio.open_connection(sock=sock)
            writer.write(
                request("/v1/queues/big/messages/receive", {"max_messages": 100}, key)
                + request("/v1/queues/jobs/messages/receive", LONG_POLL, key)
            )
            await in_flight(db_url, sent["sequence_number"])
            writer.close()

            got = await live_receive(client, "jobs")

    assert [(m["message_id"], m["receive_count"]) for m in got] == [(sent["message_id"], 1)]
