"""GET /metrics, scraped as Prometheus does and read with prometheus_client's own parser: the
numbers move with the requests (through the hot lane and through FastAPI alone, REST and SQS), the
per-queue gauges follow the leader's counts, access is refused off the metrics networks, and with
`pqs serve --workers 2` the counters of both workers add up in one scrape.

The metrics of a process are its own (prometheus-client keeps them per process, as they are meant
to be): every check here compares two scrapes, before and after."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from fastapi import FastAPI
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from app.access import parse_grant
from app.db.sessions import on_connection
from app.main import create_app
from app.service.keys import create_key
from tests.api.helpers import assert_error, client_for, make_key, receive, send, settle
from tests.conftest import admin_headers, admin_key, settings_for
from tests.faults.service import pqs_serve
from tests.sqs.harness import SqsServer

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
READ_ALL = (parse_grant("*:read"),)
# The longest wait for a worker's start or the leader's round (seconds).
WAIT_SECONDS = 60


def samples(text: str) -> Samples:
    """Every sample of an exposition, by name and labels."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name, frozenset(sample.labels.items())] = sample.value
    return found


def value(scraped: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 when the exposition has no such sample (yet)."""
    return scraped.get((name, frozenset(labels.items())), 0.0)


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


def requests(scraped: Samples, operation: str, status: int) -> float:
    return value(scraped, "pqs_requests_total", operation=operation, status=str(status))


async def test_requests_and_messages_move_the_counters(app: FastAPI, client: httpx.AsyncClient) -> None:
    assert (await client.put("/v1/queues/m", json={})).status_code == 201
    before = await scrape(client)

    await send(client, "m", 1)
    response = await client.post("/v1/queues/m/messages/batch", json={"entries": [{"id": "a", "body": 2}]})
    assert response.status_code == 200
    got = await receive(client, "m", max_messages=2)
    assert len(got) == 2
    acked = await settle(client, "m", "ack", [{"id": "1", "receipt_handle": got[0]["receipt_handle"]}])
    assert acked["successful"] == [{"id": "1"}]
    nacked = await settle(client, "m", "nack", [{"id": "2", "receipt_handle": got[1]["receipt_handle"]}])
    assert nacked["successful"] == [{"id": "2"}]
    # Refused before the dispatch (no key), and a path no operation has.
    async with client_for(app) as anonymous:
        assert (await anonymous.post("/v1/queues/m/messages", json={"body": 3})).status_code == 401
        assert (await anonymous.get("/v1/no/such/path")).status_code == 401
    assert (await client.get("/no/such/path")).status_code == 404
    assert (await client.put("/v1/queues/m/messages/batch")).status_code == 405
    after = await scrape(client)

    for operation, status in [
        ("send_message", 201),
        ("send_message_batch", 200),
        ("receive_messages", 200),
        ("ack_messages", 200),
        ("nack_messages", 200),
        ("send_message", 401),
        ("metrics", 200),
    ]:
        assert requests(after, operation, status) - requests(before, operation, status) == 1, (operation, status)
    unmatched = sum(requests(after, "unmatched", s) - requests(before, "unmatched", s) for s in (401, 404, 405))
    assert unmatched == 3
    histogram = "pqs_request_duration_seconds_count"
    assert value(after, histogram, operation="send_message") - value(before, histogram, operation="send_message") == 2
    for event in ("sent", "received", "acked", "nacked"):
        moved = value(after, "pqs_messages_total", event=event) - value(before, "pqs_messages_total", event=event)
        assert moved == {"sent": 2, "received": 2}.get(event, 1), event
    flushes = "pqs_group_commit_flush_size_count"
    assert value(after, flushes, kind="send") - value(before, flushes, kind="send") == 2
    assert value(after, flushes, kind="ack") - value(before, flushes, kind="ack") == 1
    assert value(after, "pqs_group_commit_flush_size_sum", kind="receive") > value(
        before, "pqs_group_commit_flush_size_sum", kind="receive"
    )
    # The pool as the scraping process has it now: this scrape holds no connection.
    assert value(after, "pqs_db_pool_connections", state="idle") >= 1
    assert value(after, "pqs_db_pool_waiting") == 0


async def test_dead_letters_and_expiries_are_counted(app: FastAPI, client: httpx.AsyncClient) -> None:
    assert (await client.put("/v1/queues/dlq", json={})).status_code == 201
    dead_letter = {"queue": "dlq", "max_receive_count": 1}
    assert (await client.put("/v1/queues/src", json={"dead_letter": dead_letter})).status_code == 201
    await send(client, "src", "poison")
    before = await scrape(client)
    await receive(client, "src", visibility_timeout=0)
    assert await receive(client, "src") == []  # over max_receive_count: moved, not delivered
    # The maintenance leader's round, a year on: every message is past its retention.
    report = await app.state.maintenance.run_once(now=datetime.now(UTC) + timedelta(days=365))
    assert report.expired == 1  # the dead letter
    after = await scrape(client)
    total = "pqs_messages_total"
    for event in ("received", "dead_lettered", "expired"):
        assert value(after, total, event=event) - value(before, total, event=event) == 1, event


async def test_long_poll_waiters_are_counted_while_they_wait(app: FastAPI, client: httpx.AsyncClient) -> None:
    assert (await client.put("/v1/queues/w", json={})).status_code == 201
    waiting = asyncio.create_task(client.post("/v1/queues/w/messages/receive", json={"wait_seconds": 20}))
    try:
        # Bounded: until the receive is parked (at most 20 s of looking).
        for _ in range(400):
            if value(await scrape(client), "pqs_long_poll_waiters") >= 1:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the waiting receive was never counted")
        await send(client, "w", 1)
        assert len((await waiting).json()["messages"]) == 1
    finally:
        if not waiting.done():
            waiting.cancel()
    assert value(await scrape(client), "pqs_long_poll_waiters") == 0


async def test_queue_gauges_show_the_leaders_latest_counts(app: FastAPI, client: httpx.AsyncClient) -> None:
    assert (await client.put("/v1/queues/g", json={})).status_code == 201
    assert (await client.put("/v1/queues/gone", json={})).status_code == 201
    for number in range(3):
        await send(client, "g", number)
    await send(client, "g", 9, delay_seconds=600)
    await receive(client, "g")
    gauges = "pqs_queue_messages"
    # Not counted yet: this app's loop never leads (maintenance is off in these tests).
    assert value(await scrape(client), gauges, queue="g", state="visible") == 0

    await app.state.metrics.count_queues()  # the round the leader's loop runs
    scraped = await scrape(client)
    assert value(scraped, gauges, queue="g", state="visible") == 2
    assert value(scraped, gauges, queue="g", state="in_flight") == 1
    assert value(scraped, gauges, queue="g", state="delayed") == 1
    assert value(scraped, "pqs_queue_oldest_message_age_seconds", queue="g") >= 0
    assert (gauges, frozenset({("queue", "gone"), ("state", "visible")})) in scraped
    assert ("pqs_queue_oldest_message_age_seconds", frozenset({("queue", "gone")})) not in scraped  # empty

    assert (await client.delete("/v1/queues/gone")).status_code == 204
    await app.state.metrics.count_queues()
    assert (gauges, frozenset({("queue", "gone"), ("state", "visible")})) not in await scrape(client)


async def test_metrics_are_refused_off_the_metrics_networks(db_url: str) -> None:
    """The app itself, called as uvicorn calls it for a client at 203.0.113.9 (ASGI's `client`)."""
    application = create_app(settings_for(db_url))
    async with application.router.lifespan_context(application):
        admin = await admin_headers(application)
        sender = {"Authorization": f"Bearer {await make_key(application, '*:send')}"}
        remote = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application, client=("203.0.113.9", 40000)), base_url="http://pqs.test"
        )
        async with remote:
            assert "PQS_METRICS_NETWORKS" in assert_error(await remote.get("/metrics"), 403, "forbidden")["message"]
            assert_error(await remote.get("/metrics", headers=sender), 403, "forbidden")
            assert_error(await remote.get("/metrics", headers={"Authorization": "Bearer pqs_no_such"}), 401)
            response = await remote.get("/metrics", headers=admin)
            assert response.status_code == 200 and "pqs_requests_total" in response.text
        local = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application, client=("127.0.0.1", 40000)), base_url="http://pqs.test"
        )
        async with local:
            assert (await local.get("/metrics")).status_code == 200


@pytest.mark.parametrize(
    ("networks", "loopback", "forwarded"),
    [("127.0.0.0/8,::1/128", 200, 403), ("10.0.0.0/8", 403, 403), ("0.0.0.0/0,::/0", 200, 200), ("", 403, 403)],
)
def test_pqs_serve_answers_by_the_networks_setting(
    db_url: str, tmp_path: Path, networks: str, loopback: int, forwarded: int
) -> None:
    """A real `pqs serve`, scraped from 127.0.0.1, and through a proxy there (which uvicorn
    trusts) for a client elsewhere: what PQS_METRICS_NETWORKS names decides; a key that allows
    read on every queue (a Prometheus' key) reads it from anywhere."""
    with pqs_serve(db_url, tmp_path / "serve.log", PQS_DATA_DIR=str(tmp_path), PQS_METRICS_NETWORKS=networks) as served:
        url = f"{served.url}/metrics"
        for status, headers in ((loopback, {}), (forwarded, {"X-Forwarded-For": "203.0.113.9"})):
            response = httpx.get(url, headers=headers, timeout=30)
            if status == 403:
                assert_error(response, 403, "forbidden")
            else:
                assert response.status_code == 200 and "pqs_requests_total" in response.text
        _, reader = asyncio.run(on_connection(db_url, lambda conn: create_key(conn, "prometheus", READ_ALL)))
        key = {"Authorization": f"Bearer {reader}", "X-Forwarded-For": "203.0.113.9"}
        assert httpx.get(url, headers=key, timeout=30).status_code == 200


def test_sqs_actions_are_counted_by_action(db_url: str) -> None:
    """Through the hot lane (the JSON protocol's hot actions) and FastAPI (the actions that are
    not hot)."""
    with SqsServer(db_url) as server:
        sqs = server.client(server.key("*:*"))

        def scraped() -> Samples:
            response = httpx.get(f"{server.url}/metrics", timeout=30)
            assert response.status_code == 200
            return samples(response.text)

        url = sqs.create_queue(QueueName="s")["QueueUrl"]
        before = scraped()
        sqs.send_message(QueueUrl=url, MessageBody="one")
        sqs.send_message(QueueUrl=url, MessageBody="two")
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])  # not hot: FastAPI serves it
        after = scraped()

        def moved(operation: str) -> float:
            return requests(after, operation, 200) - requests(before, operation, 200)

        assert moved("sqs:SendMessage") == 2
        assert moved("sqs:ReceiveMessage") == 1
        assert moved("sqs:DeleteMessage") == 1
        assert moved("sqs:GetQueueAttributes") == 1
        for event, count in (("sent", 2), ("received", 2), ("acked", 1)):
            total = "pqs_messages_total"
            assert value(after, total, event=event) - value(before, total, event=event) == count, event


def per_process(directory: Path, operation: str, status: int) -> dict[str, float]:
    """pqs_requests_total of one label set, by the pid of the worker whose file holds it."""
    found: dict[str, float] = {}
    for path in directory.glob("counter_*.db"):
        if path.stat().st_size < 8:  # a starting worker's file, made but not yet sized: no values
            continue
        pid = path.stem.rpartition("_")[2]
        for key, number, _, _ in MmapedDict.read_all_values_from_file(str(path)):
            _, name, labels, _ = json.loads(key)
            if name == "pqs_requests_total" and labels == {"operation": operation, "status": str(status)}:
                found[pid] = found.get(pid, 0) + number
    return found


def pooled(scraped: Samples) -> float:
    """Pooled connections, in use or idle, of every worker alive."""
    return sum(value(scraped, "pqs_db_pool_connections", state=state) for state in ("in_use", "idle"))


def own_pool(directory: Path, pid: int) -> float:
    """The pooled connections one worker's own gauge file holds (0 before it set them)."""
    path = directory / f"gauge_livesum_{pid}.db"
    if not path.exists() or path.stat().st_size < 8:  # not made yet, or made and not yet sized
        return 0
    return sum(
        number
        for key, number, _, _ in MmapedDict.read_all_values_from_file(str(path))
        if json.loads(key)[1] == "pqs_db_pool_connections"
    )


def workers_of(pid: int) -> list[int]:
    """The uvicorn worker processes of `pqs serve` (started by multiprocessing's spawn)."""
    workers = []
    for child in psutil.Process(pid).children():
        with contextlib.suppress(psutil.Error):  # one that died meanwhile, or a zombie
            if "spawn_main" in " ".join(child.cmdline()):
                workers.append(child.pid)
    return workers


def fresh_post(port: int, path: str, key: str, body: Any) -> int:
    """One request on a connection of its own (so that either worker may take it)."""
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


@pytest.fixture
def two_workers(db_url: str, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """`pqs serve --workers 2`, leading maintenance, counting queues every 0.2 s; its temporary
    directories (the metrics' among them) under tmp_path/tmp."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {
        "PQS_DATA_DIR": str(tmp_path),
        "PQS_WORKERS": "2",
        "PQS_MAINTENANCE_ENABLED": "true",
        "PQS_METRICS_INTERVAL_SECONDS": "0.2",
        # Two pooled connections in each worker, always: the pool gauges' sum is 2 per worker.
        "PQS_POOL_MIN_SIZE": "2",
        "PQS_POOL_MAX_SIZE": "2",
        "TMPDIR": str(temporary),
    }
    with pqs_serve(db_url, tmp_path / "serve.log", **env) as service:
        yield service, temporary


def serving(directory: Path, pid: int) -> list[int]:
    """The workers of `pqs serve` that finished starting (each set its pool gauges, the last step
    of its start-up), when both did; [] until then."""
    alive = workers_of(pid)
    return alive if len(alive) == 2 and all(own_pool(directory, worker) == 2 for worker in alive) else []


def test_workers_counters_add_up_in_one_scrape(db_url: str, two_workers: tuple[Any, Path]) -> None:
    service, temporary = two_workers
    [directory] = temporary.glob("pqs-metrics-*")
    # The service answers once one worker is up; on a loaded machine the other may take seconds
    # more, and every connection meanwhile goes to the first. Bounded waits here are deadlines,
    # generous for a loaded machine: what they wait for happens at once or never.
    deadline = time.monotonic() + WAIT_SECONDS
    while not serving(directory, service.proc.pid):
        assert time.monotonic() < deadline, f"the two workers never both started: {workers_of(service.proc.pid)}"
        time.sleep(0.05)
    key = admin_key(db_url)
    created = httpx.put(f"{service.url}/v1/queues/mp", json={}, headers={"Authorization": f"Bearer {key}"})
    assert created.status_code == 201
    sent = 0
    # Until both workers answered some sends: bounded. Connections opened one after the other all
    # go to whichever worker accepts first; 16 at once are shared out between the two, unless one
    # worker wakes first and takes them all (a loaded machine): then another 16.
    deadline = time.monotonic() + WAIT_SECONDS
    with ThreadPoolExecutor(16) as pool:
        while len(per_process(directory, "send_message", 201)) < 2 and time.monotonic() < deadline:
            answers = list(
                pool.map(lambda n: fresh_post(service.port, "/v1/queues/mp/messages", key, {"body": n}), range(16))
            )
            assert answers == [201] * 16
            sent += 16
    by_worker = per_process(directory, "send_message", 201)
    assert len(by_worker) == 2 and sum(by_worker.values()) == sent, by_worker

    # Whichever worker answers a scrape, it counts every worker's sends, and the leader's counts.
    for _ in range(6):
        scraped = samples(httpx.get(f"{service.url}/metrics", headers={"Connection": "close"}, timeout=30).text)
        assert requests(scraped, "send_message", 201) == sent
        assert value(scraped, "pqs_messages_total", event="sent") == sent
    deadline = time.monotonic() + WAIT_SECONDS
    while True:  # the leader's next round (every 0.2 s), bounded
        scraped = samples(httpx.get(f"{service.url}/metrics", timeout=30).text)
        if value(scraped, "pqs_queue_messages", queue="mp", state="visible") == sent:
            break
        assert time.monotonic() < deadline, "the per-queue gauges never showed the queue's messages"
        time.sleep(0.05)

    assert pooled(scraped) == 4  # both workers' pools (livesum)

    # A worker killed: uvicorn starts another. The dead one's counts stay; its gauges go.
    [victim, _] = workers_of(service.proc.pid)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + WAIT_SECONDS
    while not (alive := serving(directory, service.proc.pid)) or victim in alive:  # the new worker's start
        assert time.monotonic() < deadline, f"no new worker set its gauges: {workers_of(service.proc.pid)}"
        time.sleep(0.05)
    scraped = samples(httpx.get(f"{service.url}/metrics", timeout=30).text)
    assert pooled(scraped) == 4, "the killed worker's pool is still counted"
    assert requests(scraped, "send_message", 201) == sent

    # A graceful stop removes the metrics' directory.
    service.send_signal(signal.SIGTERM)
    service.proc.wait(timeout=30)
    assert not directory.exists()
