"""Wire models of a queue's activity (GET /v1/queues/{name}/throughput and .../groups): the
dashboard's charts and group tables (docs/dashboard.md)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from app.api.schemas import MessageState, Model


class MinuteOut(Model):
    """One minute of a queue: what was done in it, and its depth when the leader last counted
    the queue in it."""

    minute: datetime = Field(description="The minute's start.", examples=["2026-11-22T12:00:00Z"])
    sent: int = Field(description="Messages sent (not duplicates nor refused entries).", examples=[1200])
    acked: int = Field(description="Messages acked.", examples=[1180])
    dead_lettered: int = Field(description="Messages a receive moved to the dead-letter queue.", examples=[2])
    visible: int | None = Field(description="Visible messages at the minute's count; null: none.", examples=[40])
    in_flight: int | None = Field(description="In-flight messages at the minute's count.", examples=[10])
    delayed: int | None = Field(description="Delayed messages at the minute's count.", examples=[0])
    oldest_age_seconds: float | None = Field(
        description="Age of the oldest message at the minute's count (null: none counted, or the queue was empty).",
        examples=[12.5],
    )


class ThroughputOut(Model):
    minutes: list[MinuteOut] = Field(description="Every minute asked for, oldest first, the current one last.")


class GroupHeadOut(Model):
    """The first message of a group now."""

    sequence_number: int = Field(description="Its sequence number.", examples=[1024])
    sent_at: datetime = Field(description="When it was sent.", examples=["2026-11-22T12:00:00Z"])
    age_seconds: float = Field(description="How long ago, by the database's clock.", examples=[61.2])
    state: MessageState = Field(description="Waiting, or held by a receiver.", examples=["ready"])
    receive_count: int = Field(description="How many times it has been received.", examples=[0])


class GroupCountOut(Model):
    """A group as the census counted it, with its head now."""

    group_id: str = Field(description="The group id.", examples=["user-17"])
    messages: int = Field(description="Messages it held at the census (`counted_at`).", examples=[250])
    head: GroupHeadOut | None = Field(description="Its first message now; null: it has none left.")


class GroupLeaseOut(Model):
    """A group a receive holds now."""

    group_id: str = Field(description="The group id.", examples=["user-17"])
    messages: int = Field(description="Its messages in flight under the lease.", examples=[3])
    leased_at: datetime = Field(description="When the receive took them.", examples=["2026-11-22T12:00:00Z"])
    lease_age_seconds: float = Field(description="How long ago, by the database's clock.", examples=[4.2])
    lease_expires_at: datetime = Field(
        description="When the lease ends unless acked, nacked or extended (past: the group is receivable again).",
        examples=["2026-11-22T12:00:30Z"],
    )


class QueueGroupsOut(Model):
    """A FIFO queue's groups: the largest and those with the oldest heads as the maintenance
    leader last counted them (its census, `counted_at`), and those a receive holds now."""

    counted_at: datetime | None = Field(description="When the census was taken; null: not yet.")
    group_count: int | None = Field(description="Groups holding messages at the census.", examples=[2000])
    largest: list[GroupCountOut] = Field(description="The groups that held the most messages, largest first.")
    oldest: list[GroupCountOut] = Field(
        description="The groups whose head was sent first (the lowest head sequence number), oldest first."
    )
    in_flight: list[GroupLeaseOut] = Field(description="The groups a receive holds now, longest held first.")
