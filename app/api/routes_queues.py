"""Queue operations' handlers: create, read, list, change, delete, purge, redrive, history. Their routes are
rows of the operation table (app/api/operations.py); a handler's docstring is its operation's
description in the OpenAPI document."""

from __future__ import annotations

from typing import Annotated

from fastapi import Body, Query, Request, Response, status

from app.api.auth import authorize, knows, refusal
from app.api.deps import QueueName, QueuesDep
from app.api.schemas import (
    CountOut,
    DeadLetterModel,
    HistoryEntryOut,
    HistoryOutcome,
    HistoryPage,
    PeekedMessageOut,
    PeekResponse,
    QueueAttributesIn,
    QueueList,
    QueueOut,
    QueuePatch,
    RedriveRequest,
    Storable,
)
from app.domain import DeadLetter, RedriveFilter
from app.errors import Forbidden
from app.service.queues import MAX_HISTORY, MAX_PEEK
from app.service.validation import check_queue_name


async def create_queue(
    name: QueueName,
    queues: QueuesDep,
    request: Request,
    response: Response,
    attributes: Annotated[QueueAttributesIn | None, Body()] = None,
) -> QueueOut:
    """201 when created; 200 when it exists with the same attributes; 409 when they differ."""
    if attributes is not None and attributes.dead_letter is not None:
        # Dead letters are sends into that queue: the key must administer it too.
        authorize(request.scope, "admin", attributes.dead_letter.queue)
    queue, created = await queues.create(name, (attributes or QueueAttributesIn()).to_domain())
    if not created:
        response.status_code = status.HTTP_200_OK
    return QueueOut.of(queue)


async def list_queues(
    queues: QueuesDep,
    prefix: Annotated[str, Query(max_length=80, description="Only names starting with this.")] = "",
    after: Annotated[str, Query(max_length=80, description="Continue after this name (`next_after`).")] = "",
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size.")] = 100,
) -> QueueList:
    """Queues in name order, one page at a time."""
    page = await queues.list(prefix, after, limit)
    return QueueList(queues=[QueueOut.of(q) for q in page.queues], next_after=page.next_after)


async def get_queue(name: QueueName, queues: QueuesDep) -> QueueOut:
    """Attributes plus `stats`: visible, in_flight, delayed, oldest_age_seconds."""
    check_queue_name(name)
    queue, stats = await queues.get(name)
    return QueueOut.of(queue, stats)


async def update_queue(name: QueueName, patch: QueuePatch, queues: QueuesDep, request: Request) -> QueueOut:
    """Only the attributes sent change; `fifo` cannot change; `dead_letter: null` removes it, and
    `dead_letter_for: null` lets any queue name this one as its dead-letter queue again."""
    check_queue_name(name)
    if patch.dead_letter is not None:
        authorize(request.scope, "admin", patch.dead_letter.queue)
    # An explicit null keeps the current value, except for the two where null means something.
    nullable = ("dead_letter", "dead_letter_for")
    changes = {k: v for k, v in patch.model_dump(exclude_unset=True).items() if v is not None or k in nullable}
    if "dead_letter" in changes:
        dl: DeadLetterModel | None = patch.dead_letter
        changes["dead_letter"] = DeadLetter(**dl.model_dump()) if dl else None
    return QueueOut.of(await queues.update(name, changes))


async def delete_queue(name: QueueName, queues: QueuesDep) -> Response:
    """Its messages are recorded in history as purged. 409 while it is another queue's DLQ."""
    check_queue_name(name)
    await queues.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


async def purge_queue(name: QueueName, queues: QueuesDep) -> CountOut:
    """Messages are recorded in history as purged; returns how many."""
    check_queue_name(name)
    return CountOut(count=await queues.purge(name))


async def peek_messages(
    name: QueueName,
    queues: QueuesDep,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_PEEK, description="Messages to show at most.")] = 10,
) -> PeekResponse:
    """The queue's next messages without receiving them: nothing changes (no receive count, no
    lease, no visibility). A standard queue's in the order a receive considers them, a FIFO
    queue's group by group (by group id), each group's in order. For a look at a dead-letter
    queue before a redrive. A dead letter's `source_queue` is null to a key that may do nothing
    on that queue."""
    check_queue_name(name)
    peeked = [PeekedMessageOut(**m.__dict__) for m in await queues.peek(name, limit)]
    for message in peeked:
        # Another queue than the one in the path: named only to a key that may know of it, as a
        # redrive's refusals and counts do not tell a key which queues feed this one.
        source = message.source_queue
        if source is not None and not knows(request.scope, source):
            message.source_queue = None
    return PeekResponse(messages=peeked)


async def list_history(
    name: QueueName,
    queues: QueuesDep,
    outcome: Annotated[HistoryOutcome | None, Query(description="Only entries of this outcome.")] = None,
    group_id: Annotated[
        str | None, Query(min_length=1, max_length=128, description="Only this group's."), Storable
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_HISTORY, description="Entries to show at most.")] = 20,
    before: Annotated[
        int | None,
        # A history id is a bigint: a larger number is refused here, not by the database.
        Query(ge=1, le=2**63 - 1, description="Only entries older than this history id (`next_before`)."),
    ] = None,
) -> HistoryPage:
    """The queue's finished messages, newest first: how each left (acked, dead-lettered, expired,
    purged), its times, and the result or error recorded. A page looks at up to 5,000 entries to
    find `limit` matching the filters; `next_before` goes on from where it stopped."""
    check_queue_name(name)
    page = await queues.history(name, outcome=outcome, group_id=group_id, before=before, limit=limit)
    entries = [HistoryEntryOut(**{k: v for k, v in e.__dict__.items() if k != "id"}) for e in page.entries]
    return HistoryPage(entries=entries, next_before=page.next_before)


async def redrive_queue(
    name: QueueName,
    queues: QueuesDep,
    request: Request,
    only: Annotated[RedriveRequest | None, Body()] = None,
) -> CountOut:
    """On a dead-letter queue: its ready messages go back to their source, group and order kept;
    with a body, only those of a group or from a source queue, or (`dry_run`) none: the count
    says how many would move. The key needs `send` on each source queue too (a redrive sends
    into them; a dry run is refused where the redrive would be), and on `source_queue`."""
    check_queue_name(name)
    only = only or RedriveRequest()

    def may_send_into(source: str) -> None:
        if refusal(request.scope, "send", source) is not None:
            # The source is not named: the key may have no right to know of it.
            raise Forbidden("this API key does not allow send on a queue this redrive moves messages into")

    if only.source_queue is not None:
        # Checked by the name given, whatever the queue holds: a count or a refusal for a real
        # source, against 0 for any other name, would tell which queues feed this one.
        may_send_into(only.source_queue)
    subset = RedriveFilter(group_id=only.group_id, source_queue=only.source_queue)
    moved = await queues.redrive(name, check_destination=may_send_into, only=subset, dry_run=only.dry_run)
    return CountOut(count=moved)
