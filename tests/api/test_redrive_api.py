"""Contract of dead-lettering and redrive over HTTP."""

from __future__ import annotations

import httpx

from tests.api.helpers import assert_error, counts, receive, send, stats
from tests.factories import api_queue


async def test_dead_letter_then_redrive_standard(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client)
    source = await api_queue(client, dead_letter={"queue": dlq, "max_receive_count": 1})
    sent = await send(client, source, {"job": "poison"}, attributes={"k": "v"})

    [first] = await receive(client, source, visibility_timeout=0)
    assert first["receive_count"] == 1
    # The next receive finds it over max_receive_count: it moves, it is not delivered.
    assert await receive(client, source, max_messages=10) == []
    assert counts(await stats(client, source)) == (0, 0, 0)
    assert counts(await stats(client, dlq)) == (1, 0, 0)

    response = await client.post(f"/v1/queues/{dlq}/redrive")
    assert response.status_code == 200, response.text
    assert response.json() == {"count": 1}
    assert counts(await stats(client, dlq)) == (0, 0, 0)
    assert counts(await stats(client, source)) == (1, 0, 0)

    [back] = await receive(client, source)
    assert back["message_id"] == sent["message_id"]
    assert back["body"] == {"job": "poison"}
    assert back["attributes"] == {"k": "v"}
    assert back["receive_count"] == 1

    assert (await client.post(f"/v1/queues/{dlq}/redrive")).json() == {"count": 0}


async def test_dead_letter_then_redrive_fifo_keeps_group_order(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client, fifo=True)
    source = await api_queue(client, fifo=True, dead_letter={"queue": dlq, "max_receive_count": 1})
    sent = [await send(client, source, n, group_id="g", dedup_id=f"d{n}") for n in range(2)]

    for _ in range(2):
        [message] = await receive(client, source, visibility_timeout=0)
        assert message["receive_count"] == 1
        assert await receive(client, source, visibility_timeout=0) == []
    assert counts(await stats(client, dlq)) == (2, 0, 0)

    assert (await client.post(f"/v1/queues/{dlq}/redrive")).json() == {"count": 2}
    back = await receive(client, source, max_messages=10)
    while len(back) < 2:
        more = await receive(client, source, max_messages=10)
        assert more, back
        back += more
    assert [m["message_id"] for m in back] == [s["message_id"] for s in sent]
    assert [m["body"] for m in back] == [0, 1]
    assert all(m["group_id"] == "g" for m in back)


async def test_redrive_needs_a_dead_letter_queue(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    assert_error(await client.post(f"/v1/queues/{queue}/redrive"), 400, "not_a_dead_letter_queue")
    assert_error(await client.post("/v1/queues/nope/redrive"), 404, "queue_not_found")


async def test_redrive_of_a_group_moves_only_its_messages_and_a_dry_run_counts_them(
    client: httpx.AsyncClient,
) -> None:
    dlq = await api_queue(client, fifo=True)
    source = await api_queue(client, fifo=True, dead_letter={"queue": dlq, "max_receive_count": 1})
    for group, n in (("a", 0), ("b", 1), ("a", 2), ("b", 3), ("b", 4)):
        await send(client, source, n, group_id=group, dedup_id=f"d{n}")
    for _ in range(10):  # each receive holds one group's head; the next receive dead-letters it
        got = await receive(client, source, visibility_timeout=0, max_messages=10)
        if not got and counts(await stats(client, source)) == (0, 0, 0):
            break
    assert counts(await stats(client, dlq)) == (5, 0, 0)

    dry = await client.post(f"/v1/queues/{dlq}/redrive", json={"group_id": "b", "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json() == {"count": 3}
    assert counts(await stats(client, dlq)) == (5, 0, 0)  # a dry run moves nothing

    assert (await client.post(f"/v1/queues/{dlq}/redrive", json={"group_id": "b"})).json() == {"count": 3}
    assert counts(await stats(client, dlq)) == (2, 0, 0)
    back = await receive(client, source, max_messages=10)
    assert [(m["group_id"], m["body"]) for m in back] == [("b", 1), ("b", 3), ("b", 4)]  # in order
    assert (await client.post(f"/v1/queues/{dlq}/redrive", json={"group_id": "b", "dry_run": True})).json() == {
        "count": 0
    }
    # A group that is not there, and a source that does not exist, match nothing.
    assert (await client.post(f"/v1/queues/{dlq}/redrive", json={"group_id": "zz"})).json() == {"count": 0}
    assert (await client.post(f"/v1/queues/{dlq}/redrive", json={"source_queue": "nope.fifo"})).json() == {"count": 0}
    # An empty body is the redrive of everything, as no body is.
    assert (await client.post(f"/v1/queues/{dlq}/redrive", json={"dry_run": True})).json() == {"count": 2}
    assert (await client.post(f"/v1/queues/{dlq}/redrive", json={})).json() == {"count": 2}


async def test_redrive_of_one_source_leaves_the_others(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client)
    first = await api_queue(client, dead_letter={"queue": dlq, "max_receive_count": 1})
    second = await api_queue(client, dead_letter={"queue": dlq, "max_receive_count": 1})
    for queue in (first, second, second):
        await send(client, queue, queue)
    for queue in (first, second):
        for _ in range(4):
            await receive(client, queue, visibility_timeout=0, max_messages=10)
    assert counts(await stats(client, dlq)) == (3, 0, 0)

    only = {"source_queue": second}
    assert (await client.post(f"/v1/queues/{dlq}/redrive", json={**only, "dry_run": True})).json() == {"count": 2}
    assert (await client.post(f"/v1/queues/{dlq}/redrive", json=only)).json() == {"count": 2}
    assert counts(await stats(client, second)) == (2, 0, 0)
    assert counts(await stats(client, first)) == (0, 0, 0)
    assert counts(await stats(client, dlq)) == (1, 0, 0)


async def test_redrive_filters_that_match_nothing_or_are_refused(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client)
    await api_queue(client, dead_letter={"queue": dlq, "max_receive_count": 1})
    # A standard queue's messages have no group: none matches.
    assert (await client.post(f"/v1/queues/{dlq}/redrive", json={"group_id": "g"})).json() == {"count": 0}
    for body in ({"group_id": ""}, {"source_queue": ""}, {"dry_run": "maybe"}, {"other": 1}, [1]):
        assert_error(await client.post(f"/v1/queues/{dlq}/redrive", json=body), 400)
