"""A queue's activity, for the dashboard: its minutes (throughput and depth) and its FIFO
groups. Their routes are rows of the operation table (app/api/operations.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from app.api.deps import ActivityDep, QueueName
from app.api.schemas_activity import (
    GroupCountOut,
    GroupHeadOut,
    GroupLeaseOut,
    MinuteOut,
    QueueGroupsOut,
    ThroughputOut,
)
from app.service.activity import MAX_GROUPS, MAX_MINUTES, GroupCount
from app.service.validation import check_queue_name


async def get_throughput(
    name: QueueName,
    activity: ActivityDep,
    minutes: Annotated[int, Query(ge=1, le=MAX_MINUTES, description="How many minutes, the current one last.")] = 60,
) -> ThroughputOut:
    """Per minute: messages sent, acked and dead-lettered (each process adds its counts every
    10 s, so the current minute is partial), and the queue's depth when the maintenance leader
    last counted it in that minute (null where it did not). Kept for a day."""
    check_queue_name(name)
    rows = await activity.minutes(name, minutes)
    return ThroughputOut(minutes=[MinuteOut(**row._asdict()) for row in rows])


def _counted(group: GroupCount) -> GroupCountOut:
    head = group.head
    return GroupCountOut(
        group_id=group.group_id,
        messages=group.messages,
        head=None
        if head is None
        else GroupHeadOut(
            sequence_number=head.sequence_number,
            sent_at=head.sent_at,
            age_seconds=head.age_seconds,
            state="in_flight" if head.state == "in_flight" else "ready",
            receive_count=head.receive_count,
        ),
    )


async def get_groups(
    name: QueueName,
    activity: ActivityDep,
    limit: Annotated[int, Query(ge=1, le=MAX_GROUPS, description="Groups of each kind at most.")] = 10,
) -> QueueGroupsOut:
    """A FIFO queue's largest groups and those with the oldest heads, as the maintenance leader
    last counted them (`counted_at`; it counts every queue in its metrics rounds), each with its
    head now; and the groups a receive holds now with the age of their lease. 400
    `not_a_fifo_queue` for a standard queue."""
    check_queue_name(name)
    groups = await activity.groups(name, limit)
    return QueueGroupsOut(
        counted_at=groups.counted_at,
        group_count=groups.group_count,
        largest=[_counted(g) for g in groups.largest],
        oldest=[_counted(g) for g in groups.oldest],
        in_flight=[
            GroupLeaseOut(
                group_id=lease.group_id,
                messages=lease.messages,
                leased_at=lease.leased_at,
                lease_age_seconds=lease.lease_age_seconds,
                lease_expires_at=lease.lease_expires_at,
            )
            for lease in groups.in_flight
        ],
    )
