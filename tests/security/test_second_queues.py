"""Requests that reach a queue other than the one their path names, over a real socket: a redrive
moves messages into the dead-letter queue's source queues, and refusing to delete a dead-letter
queue names its sources. A key's rights on the queue in the path must not stand in for rights on
those other queues.

Why: AWS SQS asks for `sqs:SendMessage` on the destination of a redrive (StartMessageMoveTask), and
PQS asks for `admin` on a dead-letter queue named in a create or change ("dead letters are sends
into that queue"); a redrive is sends into the source queues, by the same reasoning. Listing needs
`admin` on `*` because it names every queue; an error must not name queues the key may not see.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest_asyncio

from app.domain import DeadLetter, QueueAttributes, SendEntry
from tests.security.harness import Server, exchange, raw_request, serving

SOURCE = "hidden-src"
DLQ = "jobs-dlq"


@pytest_asyncio.fixture
async def server(db_url: str) -> AsyncIterator[Server]:
    async with serving(db_url, "lane") as served:
        yield served


async def dead_letter_one(server: Server) -> None:
    """`hidden-src`, whose dead-letter queue is `jobs-dlq`, with one message moved there."""
    queues, messages = server.app.state.queues, server.app.state.messages
    await queues.create(DLQ, QueueAttributes())
    await queues.create(SOURCE, QueueAttributes(dead_letter=DeadLetter(DLQ, 1)))
    await messages.send(SOURCE, [SendEntry(body={"job": "poison"})])
    assert len(await messages.receive(SOURCE, max_messages=1, wait_seconds=0, visibility_timeout=0)) == 1
    assert await messages.receive(SOURCE, max_messages=1, wait_seconds=0) == []  # moved to the DLQ
    _, stats = await queues.get(DLQ)
    assert stats.visible == 1


async def test_redrive_needs_rights_on_the_source_queue_too(server: Server) -> None:
    await dead_letter_one(server)
    dlq_only = await server.key(f"{DLQ}:admin")
    before = await server.snapshot()

    answer = await exchange(server.port, raw_request(b"POST", f"/v1/queues/{DLQ}/redrive".encode(), dlq_only))

    assert answer.status == 403, answer
    assert answer.json()["error"]["code"] == "forbidden"
    assert await server.snapshot() == before, "the redrive moved messages into a queue the key has no rights on"
    # With rights on the source as well, the same redrive goes through.
    both = await server.key(f"{DLQ}:admin", f"{SOURCE}:*")
    answer = await exchange(server.port, raw_request(b"POST", f"/v1/queues/{DLQ}/redrive".encode(), both))
    assert (answer.status, answer.json()) == (200, {"count": 1}), answer


async def test_refusing_to_delete_a_dead_letter_queue_does_not_name_its_sources(server: Server) -> None:
    await dead_letter_one(server)
    dlq_only = await server.key(f"{DLQ}:admin")
    # The key may not learn that hidden-src exists: it may neither list queues nor read this one.
    listing = await exchange(server.port, raw_request(b"GET", b"/v1/queues", dlq_only))
    assert listing.status == 403, listing
    read = await exchange(server.port, raw_request(b"GET", f"/v1/queues/{SOURCE}".encode(), dlq_only))
    assert read.status == 403, read

    answer = await exchange(server.port, raw_request(b"DELETE", f"/v1/queues/{DLQ}".encode(), dlq_only))

    assert answer.status == 409, answer
    error = answer.json()["error"]
    assert error["code"] == "queue_in_use"
    assert SOURCE not in error["message"], error


async def redrive(server: Server, key: str, body: dict[str, object]) -> tuple[int, object]:
    request = raw_request(b"POST", f"/v1/queues/{DLQ}/redrive".encode(), key, json.dumps(body).encode())
    answer = await exchange(server.port, request)
    return answer.status, answer.json()


async def test_a_dry_run_needs_what_the_redrive_needs(server: Server) -> None:
    # A dry run answers what the redrive would: a count where it would move, and its refusal
    # where it would be refused. Counting for a key that may not send into the sources told it
    # how many messages came from queues it has no rights on.
    await dead_letter_one(server)
    dlq_only = await server.key(f"{DLQ}:admin")
    before = await server.snapshot()
    for body in ({"dry_run": True}, {"dry_run": True, "group_id": "g"}, {"dry_run": False}):
        status, answer = await redrive(server, dlq_only, body)
        if "group_id" in body:  # a standard queue's messages have no group: none would move
            assert (status, answer) == (200, {"count": 0}), body
        else:
            assert status == 403 and answer["error"]["code"] == "forbidden", (body, answer)  # type: ignore[index]
            assert SOURCE not in answer["error"]["message"], answer  # type: ignore[index]
    assert await server.snapshot() == before
    both = await server.key(f"{DLQ}:admin", f"{SOURCE}:send")
    assert await redrive(server, both, {"dry_run": True}) == (200, {"count": 1})
    assert await server.snapshot() == before


async def test_a_named_source_queue_tells_nothing_of_queues_the_key_may_not_send_into(server: Server) -> None:
    # `source_queue` names a queue: the key must be allowed to send into it whatever the DLQ
    # holds, or the answers (a count, or 403, against 0 for a name that is no source) told it
    # which queues exist and feed this DLQ.
    await dead_letter_one(server)
    dlq_only = await server.key(f"{DLQ}:admin")
    before = await server.snapshot()
    answers = set()
    for source in (SOURCE, "no-such-queue"):
        for dry_run in (True, False):
            status, answer = await redrive(server, dlq_only, {"source_queue": source, "dry_run": dry_run})
            assert status == 403, (source, dry_run, answer)
            answers.add(json.dumps(answer).replace(source, "NAME"))
    assert len(answers) == 1, answers  # the same refusal for the source and for no queue
    assert await server.snapshot() == before
    both = await server.key(f"{DLQ}:admin", f"{SOURCE}:send")
    assert await redrive(server, both, {"source_queue": SOURCE, "dry_run": True}) == (200, {"count": 1})


async def test_a_look_at_a_dead_letter_queue_names_only_sources_the_key_may_know(server: Server) -> None:
    # Each dead letter records the queue it came from (`source_queue`). Shown to a key with no
    # right at all on that queue, it told the key which queues exist and feed this one, as the
    # answers above must not; a key that may do something there sees it.
    await dead_letter_one(server)
    peek = f"/v1/queues/{DLQ}/messages".encode()
    dlq_only = await server.key(f"{DLQ}:read")
    answer = await exchange(server.port, raw_request(b"GET", peek, dlq_only))
    assert answer.status == 200, answer
    [message] = answer.json()["messages"]
    assert message["body"] == {"job": "poison"}
    assert message["source_queue"] is None, message
    assert SOURCE.encode() not in answer.body
    both = await server.key(f"{DLQ}:read", f"{SOURCE}:receive")
    answer = await exchange(server.port, raw_request(b"GET", peek, both))
    assert [m["source_queue"] for m in answer.json()["messages"]] == [SOURCE], answer
