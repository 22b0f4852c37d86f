"""Domain types of PQS: plain frozen dataclasses shared by every layer. Imports nothing of ours."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol
from uuid import UUID

QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,75}(\.fifo)?$")
# SQS: group and deduplication ids are 1-128 alphanumeric or punctuation characters.
TOKEN = re.compile(r"^[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}$")

DedupScope = Literal["queue", "group"]


@dataclass(frozen=True)
class DeadLetter:
    """Where messages go after `max_receive_count` receives."""

    queue: str
    max_receive_count: int


@dataclass(frozen=True)
class QueueAttributes:
    """The settable attributes of a queue, defaults as in SQS."""

    fifo: bool = False
    visibility_timeout: int = 30
    delay_seconds: int = 0
    retention_seconds: int = 345_600
    max_message_bytes: int = 1_048_576
    receive_wait_seconds: int = 0
    content_based_deduplication: bool = False
    deduplication_scope: DedupScope = "queue"
    dead_letter: DeadLetter | None = None
    # On a dead-letter queue: the queues that may name it as theirs; None: any queue may.
    dead_letter_for: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # A set, kept in name order: equal sets make equal attributes (an idempotent create).
        if self.dead_letter_for is not None:
            object.__setattr__(self, "dead_letter_for", tuple(sorted(set(self.dead_letter_for))))


@dataclass(frozen=True)
class Queue:
    """A queue as stored."""

    id: int
    name: str
    attributes: QueueAttributes
    dead_letter_queue_id: int | None
    created_at: datetime
    updated_at: datetime

    @property
    def fifo(self) -> bool:
        return self.attributes.fifo


MoveTaskStatus = Literal["RUNNING", "COMPLETED", "CANCELLED", "FAILED"]


@dataclass(frozen=True)
class MoveTask:
    """A message move task (SQS's StartMessageMoveTask): a redrive of the dead-letter queue
    `source`, to `destination` or (None) back to each message's source queue, at most
    `max_per_second` messages a second (None: no limit)."""

    id: UUID
    source: str
    destination: str | None
    max_per_second: int | None
    status: MoveTaskStatus
    to_move: int
    moved: int
    failure_reason: str | None
    started_at: datetime


@dataclass(frozen=True)
class QueueStats:
    """Approximate message counts of a queue at one instant."""

    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float | None


HistoryOutcome = Literal["acked", "dead_lettered", "expired", "purged"]
HISTORY_OUTCOMES: tuple[HistoryOutcome, ...] = ("acked", "dead_lettered", "expired", "purged")


@dataclass(frozen=True)
class HistoryEntry:
    """A finished message as message_history recorded it."""

    id: int  # the history id (a page's cursor)
    message_id: UUID
    sequence_number: int
    group_id: str | None
    dedup_id: str | None
    outcome: HistoryOutcome
    sent_at: datetime
    first_received_at: datetime | None
    last_received_at: datetime | None
    finished_at: datetime
    receive_count: int
    result: Any
    error: Any


@dataclass(frozen=True)
class HistoryPage:
    """A page of a queue's history, newest first; `next_before` continues it (None: the end)."""

    entries: list[HistoryEntry]
    next_before: int | None


@dataclass(frozen=True)
class RedriveFilter:
    """Which dead letters a redrive moves: of one group (FIFO), from one source queue (None: any)."""

    group_id: str | None = None
    source_queue: str | None = None


class TypedInput(Protocol):
    """A message attribute of a data type other than String, as a send gives it (a TypedValue,
    or the API's request model): its value is text, in base64 for Binary types."""

    @property
    def data_type(self) -> str: ...
    @property
    def value(self) -> str: ...


@dataclass(frozen=True, slots=True)
class TypedValue:
    """A typed message attribute (TypedInput)."""

    data_type: str
    value: str


class MessageInput(Protocol):
    """One message to enqueue, as a send gives it: a SendEntry, or the API's request model itself
    (the API hands its validated entries to the service without copying them)."""

    @property
    def body(self) -> Any: ...
    @property
    def group_id(self) -> str | None: ...
    @property
    def dedup_id(self) -> str | None: ...
    @property
    def delay_seconds(self) -> int | None: ...
    @property
    def attributes(self) -> dict[str, str]: ...
    @property
    def attribute_types(self) -> Mapping[str, TypedInput]: ...
    @property
    def trace_header(self) -> str | None: ...
    @property
    def sender_id(self) -> str | None: ...


# Not frozen, with slots: an SQS send makes one per message, and a frozen dataclass costs about
# three times as much to make (each field set through object.__setattr__). Nothing changes one.
@dataclass(slots=True)
class SendEntry:
    """One message to enqueue."""

    body: Any
    group_id: str | None = None
    dedup_id: str | None = None
    delay_seconds: int | None = None
    # (Before the attributes: an SQS send passes the five positionally, which costs less than
    # a keyword for each of its messages.)
    sender_id: str | None = None  # the key that sent it
    attributes: dict[str, str] = field(default_factory=dict)
    # Attributes of other data types than String (String ones are in `attributes`).
    attribute_types: Mapping[str, TypedInput] = field(default_factory=dict)
    trace_header: str | None = None


@dataclass(frozen=True)
class SendResult:
    """The outcome of one accepted send: the message id (canonical UUID text) is the original one
    for duplicates."""

    message_id: str
    sequence_number: int
    duplicate: bool


@dataclass(frozen=True)
class ReceivedMessage:
    """A message handed to a receiver."""

    message_id: UUID
    receipt_handle: str
    body: Any
    group_id: str | None
    dedup_id: str | None
    sequence_number: int
    receive_count: int
    sent_at: datetime
    first_received_at: datetime
    attributes: dict[str, str]
    # As stored: name -> {"data_type", "value" (base64 for Binary types)}; None when none.
    attribute_types: dict[str, dict[str, str]] | None = None
    sender_id: str | None = None
    trace_header: str | None = None
    # The queue a dead-lettered message came from (its id), None for any other message.
    source_queue_id: int | None = None


@dataclass(frozen=True)
class PeekedMessage:
    """A message as it stands in its queue, looked at without receiving it."""

    sequence_number: int
    message_id: UUID
    body: Any
    group_id: str | None
    dedup_id: str | None
    state: str  # ready or in_flight
    receive_count: int
    sent_at: datetime
    visible_at: datetime
    first_received_at: datetime | None
    last_error: Any
    attributes: dict[str, str]
    attribute_types: dict[str, dict[str, str]] | None
    sender_id: str | None
    trace_header: str | None
    # The queue a dead-lettered message came from (None for any other, or once it is deleted).
    source_queue: str | None


@dataclass(frozen=True)
class EntryFailure:
    """Why one entry of a batch failed."""

    code: str
    message: str
