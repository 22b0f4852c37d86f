"""Wire models of the v1 HTTP API (JSON). Only shapes and bounds live here; queue rules live in
the service layer."""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError
from typing_extensions import TypeAliasType

from app.access import Action, ApiKey
from app.domain import DeadLetter, DedupScope, Queue, QueueAttributes, QueueStats, ReceivedMessage
from app.service.validation import MAX_DEAD_LETTER_FOR, text_problem

EntryId = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,80}$"),
    Field(
        description="Caller's id of this entry, unique within the batch (1-80 of [A-Za-z0-9_-]).",
        examples=["e1"],
    ),
]
MAX_BATCH = 1000


def _storable(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise PydanticCustomError("text_unstorable", problem)
    return value


# Text that goes to the database as the client sent it, refused here when PostgreSQL could not
# store it (a NUL character; a lone surrogate) rather than failing in the driver. Every string of
# a request is either Storable, constrained to a pattern without either, or checked by the
# service (message contents: per entry, so that one bad message fails its entry of a batch);
# tests/api/test_hostile_input.py sends both to every string of every request.
Storable = AfterValidator(_storable)


def _label(value: str) -> str:
    shown = next((c for c in value if unicodedata.category(c) in UNSHOWN), None)
    if shown is not None:
        raise PydanticCustomError("text_unshown", f"cannot contain control or format characters (U+{ord(shown):04X})")
    return value


# What no terminal or page shows as itself: controls (CR, LF, tab, ESC), format characters (a
# right-to-left override) and line or paragraph separators.
UNSHOWN = frozenset({"Cc", "Cf", "Zl", "Zp"})
# A label people read where others put it (a key's name, in `pqs keys list` and the dashboard): a
# CR or an escape sequence in it could make that listing show a line of the writer's choosing.
Label = AfterValidator(_label)
# Group and deduplication ids: the service checks their characters (SQS's set, which has no NUL)
# per message. A lone surrogate fails the request: pydantic refuses one in any constrained string.
Token = Annotated[str, StringConstraints(min_length=1, max_length=128)]
# A client's own id kept with what it asked for (attempt id, consumer id).
ClientToken = Annotated[str, StringConstraints(min_length=1, max_length=128), Storable]


class Model(BaseModel):
    # An answer always has every field, defaulted or not: its schema (serialization mode) says so,
    # so that a generated client's response types need no check for an absent one.
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


# An enum used by several models is one named schema (a type alias), not an inline enum in each:
# a generated client then has one type for it.
DeduplicationScope = TypeAliasType(
    "DeduplicationScope",
    Annotated[
        DedupScope,
        Field(description="Whether deduplication ids are unique per queue or per message group."),
    ],
)
ScopeAction = TypeAliasType(
    "ScopeAction",
    Annotated[
        Action,
        Field(
            description="An action a key may be granted on queues: send, receive, ack (and nack), read"
            " (look only), admin (implies read)."
        ),
    ],
)
MessageState = TypeAliasType(
    "MessageState",
    Annotated[
        Literal["ready", "in_flight"],
        Field(description="Where a message stands: waiting for a receive, or held by a receiver."),
    ],
)

HistoryOutcome = TypeAliasType(
    "HistoryOutcome",
    Annotated[
        Literal["acked", "dead_lettered", "expired", "purged"],
        Field(description="How a message left its queue: acked, moved to its dead-letter queue, expired, or purged."),
    ],
)


class ErrorDetail(Model):
    code: str = Field(description="Stable machine-readable error code.", examples=["queue_not_found"])
    message: str = Field(description="Human-readable explanation.", examples=["queue 'jobs.fifo' does not exist"])


class ErrorBody(Model):
    error: ErrorDetail = Field(description="What went wrong.")


class DeadLetterModel(Model):
    queue: Annotated[str, Storable] = Field(
        min_length=1,
        max_length=80,
        description="Name of the dead-letter queue (must exist, same kind).",
        examples=["jobs-dlq.fifo"],
    )
    max_receive_count: int = Field(
        ge=1,
        le=1000,
        description="Receives after which a message moves to the dead-letter queue.",
        examples=[5],
    )


# The queues allowed to name a dead-letter queue as theirs: up to 10 names (SQS's limit).
DeadLetterFor = Annotated[
    list[Annotated[str, Storable, Field(min_length=1, max_length=80)]], Field(max_length=MAX_DEAD_LETTER_FOR)
]


class QueueAttributesIn(Model):
    """Attributes given when creating a queue; omitted ones take the SQS defaults."""

    fifo: bool = Field(default=False, description="FIFO queue (name must end in .fifo).", examples=[True])
    visibility_timeout: int = Field(
        default=30, ge=0, le=43_200, description="Seconds a received message stays hidden.", examples=[30]
    )
    delay_seconds: int = Field(
        default=0,
        ge=0,
        le=900,
        description="Seconds every new message waits before it can be received.",
        examples=[0],
    )
    retention_seconds: int = Field(
        default=345_600,
        ge=60,
        le=1_209_600,
        description="Seconds a message is kept before it expires.",
        examples=[345600],
    )
    max_message_bytes: int = Field(
        default=1_048_576,
        ge=1_024,
        le=1_048_576,
        description="Largest message (body JSON + attributes) in bytes.",
        examples=[262144],
    )
    receive_wait_seconds: int = Field(
        default=0, ge=0, le=20, description="Default long-poll wait of a receive.", examples=[20]
    )
    content_based_deduplication: bool = Field(
        default=False,
        description="Use the SHA-256 of the canonical body when a send has no dedup_id.",
        examples=[False],
    )
    deduplication_scope: DeduplicationScope = Field(
        default="queue",
        description="Whether dedup ids are unique per queue or per message group.",
        examples=["queue"],
    )
    dead_letter: DeadLetterModel | None = Field(
        default=None, description="Where messages go after max_receive_count receives."
    )
    dead_letter_for: DeadLetterFor | None = Field(
        default=None,
        description="On a dead-letter queue: the queues that may name it as their dead_letter.queue"
        " (in name order; [] for none); null for any.",
        examples=[["jobs.fifo"]],
    )

    def to_domain(self) -> QueueAttributes:
        data = self.model_dump(exclude={"dead_letter", "dead_letter_for"})
        dl = DeadLetter(**self.dead_letter.model_dump()) if self.dead_letter else None
        sources = None if self.dead_letter_for is None else tuple(self.dead_letter_for)
        return QueueAttributes(**data, dead_letter=dl, dead_letter_for=sources)


class QueuePatch(Model):
    """Attributes to change; omitted ones stay. `dead_letter: null` removes the dead-letter queue."""

    fifo: bool | None = Field(default=None, description="Cannot change; accepted if equal.", examples=[True])
    visibility_timeout: int | None = Field(
        default=None, ge=0, le=43_200, description="See queue attributes.", examples=[60]
    )
    delay_seconds: int | None = Field(default=None, ge=0, le=900, description="See queue attributes.", examples=[0])
    retention_seconds: int | None = Field(
        default=None, ge=60, le=1_209_600, description="See queue attributes.", examples=[86400]
    )
    max_message_bytes: int | None = Field(
        default=None, ge=1_024, le=1_048_576, description="See queue attributes.", examples=[65536]
    )
    receive_wait_seconds: int | None = Field(
        default=None, ge=0, le=20, description="See queue attributes.", examples=[10]
    )
    content_based_deduplication: bool | None = Field(default=None, description="See queue attributes.", examples=[True])
    deduplication_scope: DeduplicationScope | None = Field(
        default=None, description="See queue attributes.", examples=["group"]
    )
    dead_letter: DeadLetterModel | None = Field(
        default=None, description="New dead-letter settings, or null to remove."
    )
    dead_letter_for: DeadLetterFor | None = Field(
        default=None, description="See queue attributes; null lets any queue.", examples=[["jobs.fifo"]]
    )


class QueueStatsOut(Model):
    visible: int = Field(description="Messages a receive could take now.", examples=[120])
    in_flight: int = Field(description="Messages received and not yet acked whose timeout runs.", examples=[8])
    delayed: int = Field(description="Ready messages not yet due.", examples=[0])
    oldest_age_seconds: float | None = Field(description="Age of the oldest message; null when empty.", examples=[12.5])

    @classmethod
    def of(cls, stats: QueueStats) -> QueueStatsOut:
        return cls(**stats.__dict__)


class QueueOut(QueueAttributesIn):
    name: str = Field(description="Queue name.", examples=["jobs.fifo"])
    created_at: datetime = Field(description="When the queue was created.", examples=["2026-11-22T12:00:00Z"])
    updated_at: datetime = Field(description="When attributes last changed.", examples=["2026-11-22T12:00:00Z"])
    stats: QueueStatsOut | None = Field(default=None, description="Message counts (only on GET of one queue).")

    @classmethod
    def of(cls, queue: Queue, stats: QueueStats | None = None) -> QueueOut:
        attrs = queue.attributes
        return cls(
            name=queue.name,
            fifo=attrs.fifo,
            visibility_timeout=attrs.visibility_timeout,
            delay_seconds=attrs.delay_seconds,
            retention_seconds=attrs.retention_seconds,
            max_message_bytes=attrs.max_message_bytes,
            receive_wait_seconds=attrs.receive_wait_seconds,
            content_based_deduplication=attrs.content_based_deduplication,
            deduplication_scope=attrs.deduplication_scope,
            dead_letter=DeadLetterModel(**attrs.dead_letter.__dict__) if attrs.dead_letter else None,
            dead_letter_for=None if attrs.dead_letter_for is None else list(attrs.dead_letter_for),
            created_at=queue.created_at,
            updated_at=queue.updated_at,
            stats=QueueStatsOut.of(stats) if stats else None,
        )


class QueueList(Model):
    queues: list[QueueOut] = Field(description="Queues in name order.")
    next_after: str | None = Field(
        description="Pass as `after` to get the next page; null on the last page.", examples=["jobs-7"]
    )


class CountOut(Model):
    count: int = Field(description="How many messages were affected.", examples=[42])


class RedriveRequest(Model):
    """Which dead letters a redrive moves (no body: all that can go back now)."""

    group_id: Token | None = Field(
        default=None,
        description="Only this group's messages (a FIFO queue's; on a standard queue none match).",
        examples=["user-17"],
    )
    source_queue: Annotated[str, Storable] | None = Field(
        default=None,
        min_length=1,
        max_length=80,
        description="Only the messages that came from this queue (one that does not exist: none).",
        examples=["jobs.fifo"],
    )
    dry_run: bool = Field(default=False, description="Move nothing: answer how many would move now.", examples=[True])


class HistoryEntryOut(Model):
    """A finished message as the history recorded it when it left its queue."""

    message_id: UUID = Field(description="Message id.", examples=["5b0c5e2e-8a0e-4c55-9c1c-3a8f2a4d1e10"])
    sequence_number: int = Field(description="Its position in the queue it left.", examples=[1024])
    group_id: str | None = Field(description="Message group (FIFO).", examples=["user-17"])
    dedup_id: str | None = Field(description="Deduplication id in effect.", examples=["order-981-created"])
    outcome: HistoryOutcome = Field(description="How it left its queue.", examples=["acked"])
    sent_at: datetime = Field(description="When it was sent.", examples=["2026-11-22T12:00:00Z"])
    first_received_at: datetime | None = Field(description="When it was first received.", examples=[None])
    last_received_at: datetime | None = Field(description="When it was last received.", examples=[None])
    finished_at: datetime = Field(description="When it left the queue.", examples=["2026-11-22T12:00:05Z"])
    receive_count: int = Field(description="How many times it was received.", examples=[1])
    result: Any = Field(description="The result its ack recorded, if any.", examples=[{"ok": True}])
    error: Any = Field(description="The error of its last nack, if any.", examples=[None])


class HistoryPage(Model):
    entries: list[HistoryEntryOut] = Field(description="Finished messages, newest first (possibly none).")
    next_before: int | None = Field(
        description="Pass as `before` for the next, older page; null at the end. A filtered page may hold "
        "fewer entries than `limit` (even none) and still have a next one.",
        examples=[81234],
    )


class TypedAttribute(Model):
    """A message attribute of a data type other than String (SQS's typed message attributes)."""

    data_type: str = Field(
        description="Number or Binary, or String, Number or Binary followed by `.` and a label (`Number.int`, "
        "`Binary.gif`, `String.json`). Plain String attributes go in `attributes`.",
        examples=["Number.int"],
    )
    value: str = Field(description="The value as text; in base64 for Binary types.", examples=["640"])


class MessageFields(Model):
    body: Any = Field(description="The message: any JSON value.", examples=[{"task": "resize", "image": 42}])
    group_id: Token | None = Field(
        default=None,
        description="FIFO message group (required on FIFO queues, refused on standard).",
        examples=["user-17"],
    )
    dedup_id: Token | None = Field(
        default=None,
        description="Deduplication id: a repeat inside the window is answered, not enqueued.",
        examples=["order-981-created"],
    )
    delay_seconds: int | None = Field(
        default=None, ge=0, le=900, description="Per-message delay (standard queues only).", examples=[0]
    )
    attributes: dict[str, str] = Field(
        default_factory=dict,
        description="String attributes (SQS's attributes of data type String).",
        examples=[{"trace": "abc123"}],
    )
    attribute_types: dict[str, TypedAttribute] = Field(
        default_factory=dict,
        description="Attributes of other data types (Number, Binary, custom labels); at most 10 attributes in all, "
        "names distinct from those of `attributes`.",
        examples=[{"width": {"data_type": "Number.int", "value": "640"}}],
    )
    trace_header: str | None = Field(
        default=None, description="A trace header (SQS's AWSTraceHeader).", examples=["Root=1-5759e988-bd862e3fe"]
    )

    @property
    def sender_id(self) -> str | None:
        """REST sends record no sender (SQS's SenderId is the signing key's id)."""
        return None


class SendRequest(MessageFields):
    """One message to send."""


class SendResponse(Model):
    message_id: UUID = Field(
        description="Id of the message (of the original, for a duplicate).",
        examples=["5b0c5e2e-8a0e-4c55-9c1c-3a8f2a4d1e10"],
    )
    sequence_number: int = Field(description="Position in the queue; increases with each send.", examples=[1024])
    duplicate: bool = Field(description="True when this send repeated a dedup id inside the window.", examples=[False])


class SendBatchEntry(MessageFields):
    id: EntryId


class SendBatchRequest(Model):
    entries: list[SendBatchEntry] = Field(min_length=1, max_length=MAX_BATCH, description=f"1 to {MAX_BATCH} messages.")


class SendBatchResult(SendResponse):
    id: EntryId


class BatchFailure(Model):
    id: EntryId
    code: str = Field(description="Error code for this entry.", examples=["invalid_message"])
    message: str = Field(description="Why this entry failed.", examples=["group_id is required on a FIFO queue"])


class SendBatchResponse(Model):
    successful: list[SendBatchResult] = Field(description="Entries accepted (or answered as duplicates).")
    failed: list[BatchFailure] = Field(description="Entries refused, with the reason.")


class ReceiveRequest(Model):
    max_messages: int = Field(default=1, ge=1, le=100, description="Most messages to return.", examples=[10])
    wait_seconds: int | None = Field(
        default=None,
        ge=0,
        le=20,
        description="Long-poll wait; default: the queue's receive_wait_seconds.",
        examples=[20],
    )
    visibility_timeout: int | None = Field(
        default=None,
        ge=0,
        le=43_200,
        description="Override of the queue's visibility timeout.",
        examples=[60],
    )
    attempt_id: ClientToken | None = Field(
        default=None,
        description="Retry token: repeating a receive with it within 5 minutes returns the same messages (those "
        "still in flight, same receipt handles) and hides them again for this receive's visibility timeout.",
        examples=["worker-3-attempt-99"],
    )
    consumer_id: ClientToken | None = Field(
        default=None,
        description="Who is receiving (e.g. a worker's name); `POST .../messages/release` with it returns at once "
        "every message this consumer still holds.",
        examples=["worker-3"],
    )


class ReleaseRequest(Model):
    consumer_id: ClientToken = Field(description="The consumer id given to receive.", examples=["worker-3"])


class MessageOut(Model):
    message_id: UUID = Field(description="Message id.", examples=["5b0c5e2e-8a0e-4c55-9c1c-3a8f2a4d1e10"])
    receipt_handle: str = Field(
        description="Handle of this delivery; needed to ack, nack or change visibility.",
        examples=["AQAAAAAAAAQAGx3U0m1vRdGmY4c1aB2c3d"],
    )
    body: Any = Field(description="The message body as sent.", examples=[{"task": "resize", "image": 42}])
    group_id: str | None = Field(description="Message group (FIFO).", examples=["user-17"])
    dedup_id: str | None = Field(description="Deduplication id in effect.", examples=["order-981-created"])
    sequence_number: int = Field(description="Position in the queue.", examples=[1024])
    receive_count: int = Field(description="How many times it has been received, this time included.", examples=[1])
    sent_at: datetime = Field(description="When it was sent.", examples=["2026-11-22T12:00:00Z"])
    first_received_at: datetime = Field(description="When it was first received.", examples=["2026-11-22T12:00:01Z"])
    attributes: dict[str, str] = Field(description="String attributes as sent.", examples=[{"trace": "abc123"}])
    attribute_types: dict[str, TypedAttribute] | None = Field(
        description="Attributes of other data types as sent; null when none.",
        examples=[{"width": {"data_type": "Number.int", "value": "640"}}],
    )
    sender_id: str | None = Field(description="The key that sent it over SQS (SenderId).", examples=["k7Qx2a"])
    trace_header: str | None = Field(description="Its trace header, if sent.", examples=["Root=1-5759e988-bd862e3fe"])

    @classmethod
    def of(cls, m: ReceivedMessage) -> MessageOut:
        fields = dict(m.__dict__)
        del fields["source_queue_id"]  # SQS's DeadLetterQueueSourceArn; REST does not show it
        return cls(**fields)


class PeekedMessageOut(Model):
    """A message as it stands in its queue (a peek: not received, nothing changed)."""

    sequence_number: int = Field(description="Position in the queue.", examples=[1024])
    message_id: UUID = Field(description="Message id.", examples=["5b0c5e2e-8a0e-4c55-9c1c-3a8f2a4d1e10"])
    body: Any = Field(description="The message body as sent.", examples=[{"task": "resize", "image": 42}])
    group_id: str | None = Field(description="Message group (FIFO).", examples=["user-17"])
    dedup_id: str | None = Field(description="Deduplication id in effect.", examples=["order-981-created"])
    state: MessageState = Field(description="Waiting, or held by a receiver.", examples=["ready"])
    receive_count: int = Field(description="How many times it has been received.", examples=[3])
    sent_at: datetime = Field(description="When it was sent.", examples=["2026-11-22T12:00:00Z"])
    visible_at: datetime = Field(
        description="When it can next be received (ready) or its visibility timeout ends (in flight).",
        examples=["2026-11-22T12:00:30Z"],
    )
    first_received_at: datetime | None = Field(description="When it was first received.", examples=[None])
    last_error: Any = Field(description="The error of its last nack, if any.", examples=[{"why": "timeout"}])
    attributes: dict[str, str] = Field(description="String attributes as sent.", examples=[{"trace": "abc123"}])
    attribute_types: dict[str, TypedAttribute] | None = Field(
        description="Attributes of other data types as sent; null when none.", examples=[None]
    )
    sender_id: str | None = Field(description="The key that sent it over SQS (SenderId).", examples=[None])
    trace_header: str | None = Field(description="Its trace header, if sent.", examples=[None])
    source_queue: str | None = Field(
        description="On a dead-letter queue: the queue it came from.", examples=["jobs.fifo"]
    )


class PeekResponse(Model):
    messages: list[PeekedMessageOut] = Field(description="The queue's next messages (possibly none).")


class ReceiveResponse(Model):
    messages: list[MessageOut] = Field(description="Messages received (possibly none).")


class ReceiptFields(Model):
    """What every entry of an ack, nack or visibility batch names: itself and the receipt."""

    id: EntryId
    receipt_handle: str = Field(
        max_length=256,
        description="Receipt handle from receive.",
        examples=["AQAAAAAAAAQAGx3U0m1vRdGmY4c1aB2c3d"],
    )


class AckEntry(ReceiptFields):
    result: Any = Field(default=None, description="Result to keep in history (any JSON).", examples=[{"ok": True}])


class NackEntry(ReceiptFields):
    delay_seconds: int = Field(
        default=0, ge=0, le=43_200, description="Seconds before it can be received again.", examples=[10]
    )
    error: Any = Field(default=None, description="Error to record (any JSON).", examples=[{"reason": "timeout"}])


class VisibilityEntry(ReceiptFields):
    visibility_timeout: int = Field(ge=0, le=43_200, description="New remaining timeout in seconds.", examples=[120])


class AckRequest(Model):
    entries: list[AckEntry] = Field(min_length=1, max_length=MAX_BATCH, description="Messages to ack.")


class NackRequest(Model):
    entries: list[NackEntry] = Field(min_length=1, max_length=MAX_BATCH, description="Messages to return.")


class VisibilityRequest(Model):
    entries: list[VisibilityEntry] = Field(min_length=1, max_length=MAX_BATCH, description="Timeouts to change.")


class EntryOk(Model):
    id: EntryId


class BatchResponse(Model):
    successful: list[EntryOk] = Field(description="Entries that took effect.")
    failed: list[BatchFailure] = Field(description="Entries that did not, with the reason.")


class Health(Model):
    status: str = Field(description="`ok` when healthy.", examples=["ok"])


class GrantOut(Model):
    queues: str = Field(description="Glob of the queue names the grant covers.", examples=["jobs-*"])
    actions: list[ScopeAction] = Field(
        description="What the key may do on those queues.", examples=[["send", "receive"]]
    )


class KeyOut(Model):
    key_id: str | None = Field(
        description="The calling key's id; null when access control is off (loopback only).",
        examples=["3f9a0c21b7d4"],
    )
    grants: list[GrantOut] = Field(description="What the key may do, grant by grant.")


# Grants a key made through the API may hold at most: a handful of globs, not a list of queues.
MAX_GRANTS = 20


class GrantIn(Model):
    queues: Annotated[str, StringConstraints(min_length=1, max_length=200)] = Field(
        description="Glob of the queue names the grant covers (fnmatch: `*`, `?`, `[...]`).", examples=["jobs-*"]
    )
    actions: list[ScopeAction] = Field(
        min_length=1, max_length=5, description="What the new key may do on those queues.", examples=[["read"]]
    )


class KeyCreateRequest(Model):
    name: Annotated[str, StringConstraints(min_length=1, max_length=100), Storable, Label] = Field(
        description="A label for the key: who or what uses it.", examples=["on-call (read only)"]
    )
    grants: list[GrantIn] = Field(min_length=1, max_length=MAX_GRANTS, description="What the key may do.")


class ApiKeyOut(Model):
    key_id: str = Field(description="The key's public id.", examples=["3f9a0c21b7d4"])
    name: str = Field(description="Its label.", examples=["on-call (read only)"])
    grants: list[GrantOut] = Field(description="What the key may do, grant by grant.")
    created_at: datetime = Field(description="When it was made.", examples=["2026-11-22T12:00:00Z"])
    revoked_at: datetime | None = Field(description="When it was revoked; null while it is valid.")
    signs_sqs: bool = Field(description="Whether it has an SQS secret access key (keys made before SQS have none).")

    @classmethod
    def of(cls, key: ApiKey) -> ApiKeyOut:
        return cls(
            key_id=key.key_id,
            name=key.name,
            grants=[GrantOut.model_validate(g.to_json()) for g in key.grants],
            created_at=key.created_at,
            revoked_at=key.revoked_at,
            signs_sqs=key.signs_sqs,
        )


class ApiKeyList(Model):
    keys: list[ApiKeyOut] = Field(description="Every key, revoked ones included, oldest first.")


class ApiKeyCreated(Model):
    api_key: ApiKeyOut = Field(description="The key as listed from now on.")
    key: str = Field(
        description="The key itself, for `Authorization: Bearer`. Shown this once: only its hash is stored.",
        examples=["pqs_3f9a0c21b7d4_" + "x" * 43],
    )
    sqs_secret_access_key: str = Field(
        description="The SQS secret access key (its access key id is `key_id`). Shown this once.",
    )
