"""Contract of a queue's history (GET /v1/queues/{name}/history): its finished messages, newest
first, filtered by outcome and group, page by page."""

from __future__ import annotations

from typing import Any

import httpx

from app.service.queues import QueueService
from tests.api.helpers import assert_error, receive, send, settle
from tests.factories import api_queue


async def history(client: httpx.AsyncClient, queue: str, **params: Any) -> dict[str, Any]:
    response = await client.get(f"/v1/queues/{queue}/history", params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


async def test_history_shows_each_outcome_newest_first_with_result_and_error(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client, fifo=True)
    queue = await api_queue(
        client, fifo=True, content_based_deduplication=True, dead_letter={"queue": dlq, "max_receive_count": 1}
    )
    acked = await send(client, queue, "a", group_id="g1")
    [held] = await receive(client, queue)
    done = await settle(
        client, queue, "ack", [{"id": "1", "receipt_handle": held["receipt_handle"], "result": {"ok": 1}}]
    )
    assert done["failed"] == []
    failed = await send(client, queue, "b", group_id="g2")
    [held] = await receive(client, queue)
    entry = {"id": "1", "receipt_handle": held["receipt_handle"], "error": {"why": "boom"}}
    assert (await settle(client, queue, "nack", [entry]))["failed"] == []
    assert await receive(client, queue) == []  # over max_receive_count: dead-lettered
    purged = await send(client, queue, "c", group_id="g1")
    assert (await client.post(f"/v1/queues/{queue}/purge")).json() == {"count": 1}

    page = await history(client, queue)
    assert page["next_before"] is None
    entries = page["entries"]
    assert [(e["message_id"], e["outcome"]) for e in entries] == [
        (purged["message_id"], "purged"),
        (failed["message_id"], "dead_lettered"),
        (acked["message_id"], "acked"),
    ]
    assert entries[2]["result"] == {"ok": 1} and entries[2]["error"] is None
    assert entries[2]["receive_count"] == 1 and entries[2]["group_id"] == "g1"
    assert entries[2]["sequence_number"] == acked["sequence_number"]
    assert entries[2]["first_received_at"] is not None and entries[2]["last_received_at"] is not None
    assert entries[1]["error"] == {"why": "boom"}
    assert entries[0]["receive_count"] == 0 and entries[0]["first_received_at"] is None
    assert set(entries[0]) == {
        "message_id", "sequence_number", "group_id", "dedup_id", "outcome", "sent_at", "first_received_at",
        "last_received_at", "finished_at", "receive_count", "result", "error",
    }  # fmt: skip

    only_g1 = await history(client, queue, group_id="g1")
    assert [e["outcome"] for e in only_g1["entries"]] == ["purged", "acked"]
    assert [e["outcome"] for e in (await history(client, queue, outcome="acked"))["entries"]] == ["acked"]
    assert (await history(client, queue, outcome="expired"))["entries"] == []
    # The dead-letter queue has its own history (nothing has left it yet).
    assert (await history(client, dlq)) == {"entries": [], "next_before": None}


async def test_history_pages_go_back_with_next_before(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    sent = [await send(client, queue, n) for n in range(5)]
    assert (await client.post(f"/v1/queues/{queue}/purge")).json() == {"count": 5}
    newest_first = [s["message_id"] for s in reversed(sent)]

    seen: list[str] = []
    before = None
    for _ in range(5):
        page = await history(client, queue, limit=2, **({"before": before} if before else {}))
        seen += [e["message_id"] for e in page["entries"]]
        before = page["next_before"]
        if before is None:
            break
    assert sorted(seen) == sorted(newest_first)  # one statement purged them: one finish time
    assert len(seen) == 5


async def test_a_filtered_page_stops_after_its_walk_and_goes_on(
    client: httpx.AsyncClient, queues: QueueService
) -> None:
    # Five entries of one group under ten of another: a walk of 4 entries a page finds none of
    # the first group on the first pages, and says where to go on; all five come out in the end.
    queue = await api_queue(client, fifo=True, content_based_deduplication=True)
    for n in range(5):
        await send(client, queue, f"rare{n}", group_id="rare")
    for n in range(10):
        await send(client, queue, f"busy{n}", group_id="busy")
    await client.post(f"/v1/queues/{queue}/purge")
    pages = []
    before = None
    for _ in range(10):
        page = await queues.history(queue, group_id="rare", before=before, limit=3, walk=4)
        pages.append([e.group_id for e in page.entries])
        before = page.next_before
        if before is None:
            break
    assert pages[0] == [] and before is None
    assert sum(len(p) for p in pages) == 5 and all(set(p) <= {"rare"} for p in pages), pages
    assert max(len(p) for p in pages) == 3, pages


async def test_history_refuses_what_it_cannot_read(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    for params in (
        {"outcome": "lost"},
        {"limit": 0},
        {"limit": 101},
        {"before": 0},
        {"before": "x"},
        {"group_id": ""},
        {"before": 2**63},
        {"group_id": "a\x00"},
    ):
        assert_error(await client.get(f"/v1/queues/{queue}/history", params=params), 400)
    assert_error(await client.get("/v1/queues/nope/history"), 404, "queue_not_found")
