"""What every SQS action works with: the services, where the queues live (URLs, ARNs), the
request's client, the access check, and the one translation of PQS's domain errors into SQS's.

Queue URLs are `<base>/<account id>/<queue name>`, ARNs `arn:aws:sqs:<region>:<account>:<name>`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Final
from urllib.parse import unquote, urlsplit

from app.access import Action
from app.domain import EntryFailure
from app.errors import (
    Forbidden,
    InvalidAttributes,
    InvalidInput,
    InvalidReceiptHandle,
    MessageTooLarge,
    MoveQueueNotFound,
    MoveTaskInProgress,
    MoveTaskNotFound,
    MoveTaskNotRunning,
    NotFound,
    PqsError,
    QueueAttributesConflict,
    QueueInUse,
    QueueNotFound,
    ReceiptNotFound,
    RequestTooLarge,
    Unauthorized,
    Unavailable,
)
from app.service.messages import MessageService
from app.service.move_tasks import MoveTasks
from app.service.queues import QueueService
from app.service.recipient import Recipient
from app.service.validation import check_queue_name
from app.sqs import errors
from app.sqs.errors import ErrorType, SqsError

# PQS's domain errors as SQS answers them, looked up along the error's class hierarchy (the most
# specific class listed wins) and, for a failed batch entry, by the error's code.
DOMAIN_ERRORS: Final[dict[type[PqsError], ErrorType]] = {
    QueueNotFound: errors.QUEUE_DOES_NOT_EXIST,
    # A move task's missing queue or task: the Smithy model's and SQS's recorded answers.
    MoveQueueNotFound: errors.RESOURCE_NOT_FOUND,
    MoveTaskNotFound: errors.RESOURCE_NOT_FOUND,
    # SQS answers a second running task InvalidParameterValue; a cancel of an ended task has no
    # recorded answer: the model's one error of the action for a task it cannot act on.
    MoveTaskInProgress: errors.INVALID_PARAMETER_VALUE,
    MoveTaskNotRunning: errors.RESOURCE_NOT_FOUND,
    QueueAttributesConflict: errors.QUEUE_NAME_EXISTS,
    QueueInUse: errors.INVALID_PARAMETER_VALUE,
    InvalidAttributes: errors.INVALID_ATTRIBUTE_VALUE,
    InvalidReceiptHandle: errors.RECEIPT_HANDLE_IS_INVALID,
    ReceiptNotFound: errors.RECEIPT_HANDLE_IS_INVALID,
    MessageTooLarge: errors.INVALID_PARAMETER_VALUE,
    RequestTooLarge: errors.BATCH_REQUEST_TOO_LONG,
    InvalidInput: errors.INVALID_PARAMETER_VALUE,
    NotFound: errors.INVALID_PARAMETER_VALUE,
    Forbidden: errors.ACCESS_DENIED,
    Unauthorized: errors.ACCESS_DENIED,
    Unavailable: errors.SERVICE_UNAVAILABLE,
}


def _by_code() -> dict[str, ErrorType]:
    found: dict[str, ErrorType] = {}
    pending: list[type[PqsError]] = [PqsError]
    while pending:
        cls = pending.pop()
        found[cls.code] = sqs_error_type(cls)
        pending.extend(cls.__subclasses__())
    return found


def sqs_error_type(cls: type[PqsError]) -> ErrorType:
    """The SQS error a domain error class is answered with (InternalFailure when none is listed)."""
    for base in cls.__mro__:
        kind = DOMAIN_ERRORS.get(base)
        if kind is not None:
            return kind
    return errors.INTERNAL_FAILURE


def to_sqs(error: PqsError) -> SqsError:
    """A domain error as the SQS error a client gets."""
    return SqsError(sqs_error_type(type(error)), error.message)


_BY_CODE: Final = _by_code()


def existing_name(name: str) -> str:
    """A queue name to look up: QueueDoesNotExist (as SQS answers a name no queue has) for one no
    queue can have, before it reaches a query; a lone surrogate could not even be sent."""
    try:
        check_queue_name(name)
    except InvalidInput:
        raise SqsError(errors.QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.") from None
    return name


def failure_to_sqs(failure: EntryFailure) -> SqsError:
    """A failed entry of a batch (its domain error code) as an SQS error."""
    return SqsError(_BY_CODE.get(failure.code, errors.INVALID_PARAMETER_VALUE), failure.message)


@functools.lru_cache(maxsize=1024)
def _name_of_url(url: str, account_id: str) -> str:
    # Cached: a worker sends the same queue URL in every request, and each request reads it
    # twice (for its scope check, then in its action). An error is raised again, never cached.
    try:
        path = urlsplit(url).path if "://" in url else url
    except ValueError:
        path = ""
    parts = [unquote(part) for part in path.split("/") if part]
    if len(parts) < 2 or not parts[-1]:
        raise SqsError(errors.INVALID_ADDRESS, "The address is not valid for this endpoint.")
    if parts[-2] != account_id:
        raise SqsError(errors.QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.")
    return existing_name(parts[-1])


@dataclass
class Place:
    """Where this endpoint's queues live. `base` tells the start of queue URLs (the setting, or
    the request's scheme and host) when an action first answers a URL: the others never pay
    for it."""

    account_id: str
    region: str
    base: Callable[[], str]

    @cached_property
    def base_url(self) -> str:
        return self.base().rstrip("/")

    def url(self, name: str) -> str:
        return f"{self.base_url}/{self.account_id}/{name}"

    def arn(self, name: str) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account_id}:{name}"

    def name_of_url(self, url: str) -> str:
        """The queue a queue URL names. Any host is accepted (clients reach PQS by many names);
        the account must be this endpoint's. InvalidAddress for a URL of no queue."""
        return _name_of_url(url, self.account_id)

    def name_of_arn(self, arn: str) -> str:
        """The queue an ARN names (of this region and account); InvalidParameterValue otherwise."""
        parts = arn.split(":")
        if len(parts) != 6 or parts[:3] != ["arn", "aws", "sqs"] or parts[3] != self.region:
            raise SqsError(errors.INVALID_PARAMETER_VALUE, f"{arn[:200]!r} is not the ARN of a queue of this endpoint.")
        if parts[4] != self.account_id:
            raise SqsError(errors.QUEUE_DOES_NOT_EXIST, "The specified queue does not exist.")
        return existing_name(parts[5])


@dataclass(slots=True)
class Context:
    """One request's view of the service, as its action sees it."""

    queues: QueueService
    messages: MessageService
    moves: MoveTasks
    place: Place
    # Raises Forbidden unless the caller may do `action` on `queue` (a second queue a request
    # names or reaches: the dead-letter queue of a RedrivePolicy, where a move task sends).
    authorize: Callable[[Action, str], None]
    # Whether the caller may know of a queue at all (some action on it): a queue an answer would
    # name that the request did not (a move task's destination) is named only then.
    knows: Callable[[str], bool]
    recipient: Recipient | None = None
    # The signing key's id (SQS's SenderId of what this request sends); None when signatures
    # are not checked.
    sender_id: str | None = None
