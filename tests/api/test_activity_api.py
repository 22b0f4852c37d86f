"""A queue's activity for the dashboard: GET /v1/queues/{name}/throughput (sent, acked and
dead-lettered per minute, and the leader's counts) and GET /v1/queues/{name}/groups (a FIFO
queue's largest, oldest and in-flight groups)."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from app.db.engine import Database
from app.service.metrics_loop import MetricsLoop
from app.service.throughput import Throughput
from tests.api.helpers import ack, assert_error, receive, send, settle
from tests.factories import api_queue


async def minutes(client: httpx.AsyncClient, queue: str, **params: int) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/queues/{queue}/throughput", params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["minutes"]
    return found


def total(rows: list[dict[str, Any]], field: str) -> int:
    return sum(row[field] for row in rows)


async def stored(db: Database) -> list[dict[str, Any]]:
    """Every queue_minutes row's counts, as committed."""

    async def read(conn: Any) -> list[dict[str, Any]]:
        cursor = await conn.execute("SELECT queue_id, sent, acked, dead_lettered FROM queue_minutes ORDER BY 1, minute")
        return list(await cursor.fetchall())

    return await db.run(read)


async def test_a_minute_counts_what_was_sent_and_acked_once_flushed_or_not(
    app: FastAPI, client: httpx.AsyncClient, db: Database
) -> None:
    queue = await api_queue(client)
    for n in range(3):
        await send(client, queue, {"n": n})
    await send(client, queue, "dup", dedup_id="same")
    await send(client, queue, "dup", dedup_id="same")  # a duplicate is no new message
    got = await receive(client, queue, max_messages=2)
    await ack(client, queue, *(m["receipt_handle"] for m in got))
    await ack(client, queue, got[0]["receipt_handle"])  # acked already: not counted again

    # This process's counts show before any flush (the send and ack above were now).
    seen = await minutes(client, queue)
    assert len(seen) == 60 and seen == sorted(seen, key=lambda row: row["minute"])
    assert (total(seen, "sent"), total(seen, "acked"), total(seen, "dead_lettered")) == (4, 2, 0)
    assert await stored(db) == []

    # Flushed: the same figures, now from queue_minutes, counted once.
    throughput: Throughput = app.state.activity.throughput
    assert await throughput.flush() >= 1
    assert await throughput.flush() == 0
    assert sum(row["sent"] for row in await stored(db)) == 4
    again = await minutes(client, queue, minutes=2)
    assert len(again) == 2 and (total(again, "sent"), total(again, "acked")) == (4, 2)
    assert again[-1]["minute"] == seen[-1]["minute"] or again[-1]["minute"] > seen[-1]["minute"]
    # Another queue's minutes are its own.
    other = await api_queue(client)
    assert total(await minutes(client, other), "sent") == 0


async def test_a_receive_that_dead_letters_counts_on_its_queue(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client)
    source = await api_queue(client, dead_letter={"queue": dlq, "max_receive_count": 1})
    await send(client, source, "poison")
    [got] = await receive(client, source)
    await settle(client, source, "nack", [{"id": "1", "receipt_handle": got["receipt_handle"]}])
    assert await receive(client, source) == []  # over max_receive_count: dead-lettered
    seen = await minutes(client, source)
    assert (total(seen, "sent"), total(seen, "acked"), total(seen, "dead_lettered")) == (1, 0, 1)
    assert total(await minutes(client, dlq), "dead_lettered") == 0


async def test_the_leaders_count_is_the_minutes_depth(app: FastAPI, client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    for n in range(2):
        await send(client, queue, n)
    await receive(client, queue)
    assert all(row["visible"] is None for row in await minutes(client, queue))
    metrics: MetricsLoop = app.state.metrics
    await metrics.count_queues()
    counted = [row for row in await minutes(client, queue, minutes=2) if row["visible"] is not None]
    assert [(row["visible"], row["in_flight"], row["delayed"]) for row in counted] == [(1, 1, 0)]
    assert counted[0]["oldest_age_seconds"] >= 0


async def test_throughput_refusals(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    for bad in (0, 1441, "x"):
        answer = await client.get(f"/v1/queues/{queue}/throughput", params={"minutes": bad})
        assert_error(answer, 400, "invalid_request")
    assert_error(await client.get("/v1/queues/missing/throughput"), 404, "queue_not_found")
    assert len(await minutes(client, queue, minutes=1440)) == 1440


async def groups(client: httpx.AsyncClient, queue: str, **params: int) -> dict[str, Any]:
    response = await client.get(f"/v1/queues/{queue}/groups", params=params)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def test_groups_the_largest_the_oldest_and_those_in_flight(app: FastAPI, client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True, content_based_deduplication=True)
    # Sent in this order: `small` has the oldest head, then `big`, then `mid`.
    for group, count in (("small", 1), ("big", 5), ("mid", 3)):
        for n in range(count):
            await send(client, queue, f"{group}-{n}", group_id=group)
    [held] = await receive(client, queue, max_messages=1)  # the first group in line: `small`
    assert held["group_id"] == "small"

    # No census yet: the leases are read now all the same.
    before = await groups(client, queue)
    assert (before["counted_at"], before["group_count"], before["largest"], before["oldest"]) == (None, None, [], [])
    [lease] = before["in_flight"]
    assert (lease["group_id"], lease["messages"]) == ("small", 1) and lease["lease_age_seconds"] >= 0
    assert lease["lease_expires_at"] > lease["leased_at"]

    metrics: MetricsLoop = app.state.metrics
    await metrics.count_queues()
    seen = await groups(client, queue)
    assert seen["counted_at"] is not None and seen["group_count"] == 3
    assert [(g["group_id"], g["messages"]) for g in seen["largest"]] == [("big", 5), ("mid", 3), ("small", 1)]
    assert [g["group_id"] for g in seen["oldest"]] == ["small", "big", "mid"]
    small_head = seen["oldest"][0]["head"]
    assert small_head["state"] == "in_flight" and small_head["receive_count"] == 1
    assert small_head["sequence_number"] < seen["oldest"][1]["head"]["sequence_number"]
    assert [g["group_id"] for g in (await groups(client, queue, limit=1))["largest"]] == ["big"]

    # Acked: `small` has no head left (until the next census drops it), and nothing is in flight.
    await ack(client, queue, held["receipt_handle"])
    after = await groups(client, queue)
    assert after["oldest"][0]["group_id"] == "small" and after["oldest"][0]["head"] is None
    assert after["in_flight"] == []
    await metrics.count_queues()
    assert [g["group_id"] for g in (await groups(client, queue))["oldest"]] == ["big", "mid"]


async def test_groups_refusals(client: httpx.AsyncClient) -> None:
    standard = await api_queue(client)
    assert_error(await client.get(f"/v1/queues/{standard}/groups"), 400, "not_a_fifo_queue")
    fifo = await api_queue(client, fifo=True)
    for bad in (0, 51):
        assert_error(await client.get(f"/v1/queues/{fifo}/groups", params={"limit": bad}), 400, "invalid_request")
    assert_error(await client.get("/v1/queues/missing.fifo/groups"), 404, "queue_not_found")


async def test_a_deleted_queue_leaves_no_minutes_or_census(
    app: FastAPI, client: httpx.AsyncClient, db: Database
) -> None:
    queue = await api_queue(client, fifo=True, content_based_deduplication=True)
    await send(client, queue, "x", group_id="g")
    await app.state.activity.throughput.flush()
    await app.state.metrics.count_queues()
    assert (await client.delete(f"/v1/queues/{queue}")).status_code == 204

    async def left(conn: Any) -> dict[str, Any]:
        cursor = await conn.execute(
            "SELECT (SELECT count(*) FROM queue_minutes) AS minutes,"
            " (SELECT count(*) FROM queue_group_census) AS census"
        )
        row: dict[str, Any] = await cursor.fetchone()
        return row

    assert await db.run(left) == {"minutes": 0, "census": 0}
