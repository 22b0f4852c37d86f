"""Domain exceptions of PQS. The HTTP layer maps each to a status code in one place
(`app/api/errors.py`); the service and repository layers never speak HTTP.

    PqsError
    ├── Unauthorized                   no API key, or an unknown or revoked one
    ├── Forbidden                      the key's scopes do not allow this action on this queue
    │   └── GrantBeyondKey             a new key would hold more than the key that makes it
    ├── NotFound
    │   ├── QueueNotFound
    │   │   └── MoveQueueNotFound      a move task's source or destination queue
    │   ├── MoveTaskNotFound           no move task of this queue has this id
    │   ├── ReceiptNotFound            no in-flight message holds this receipt handle
    │   └── KeyNotFound                no API key has this key id
    ├── Conflict
    │   ├── QueueAttributesConflict    PUT of an existing queue with other attributes
    │   ├── QueueInUse                 the queue is the dead-letter queue of another queue
    │   ├── MoveTaskInProgress         a move task of this queue is running already
    │   ├── MoveTaskNotRunning         cancel of a move task that has ended
    │   └── KeyRevokesItself           DELETE /v1/keys/{key_id} of the calling key
    ├── InvalidInput
    │   ├── InvalidQueueName
    │   ├── InvalidAttributes          bad combination of queue attributes (e.g. DLQ kind)
    │   ├── InvalidMessage             a message breaks a rule of its queue (group id, delay ...)
    │   ├── InvalidReceiptHandle       not a handle this service issued
    │   ├── NotADeadLetterQueue        redrive asked of a queue that is no queue's DLQ
    │   └── NotAFifoQueue              groups asked of a standard queue
    ├── TooLarge
    │   ├── MessageTooLarge            over the queue's max_message_bytes
    │   └── RequestTooLarge            over the service's max_request_bytes
    └── Unavailable                    the database cannot be reached right now

A message that quotes client input (a queue name, a key id, an attribute name) quotes it with
`quote`, so that an error never echoes more than ECHO_LIMIT characters of what it was sent.
"""

from __future__ import annotations

# Characters of client input an error message quotes at most.
ECHO_LIMIT = 100


def quote(text: str) -> str:
    """Client input as an error message quotes it: repr() (control characters and lone surrogates
    escaped), cut to its first ECHO_LIMIT characters, then an ellipsis and the total length."""
    if len(text) <= ECHO_LIMIT:
        return repr(text)
    return f"{text[:ECHO_LIMIT]!r}… ({len(text):,} characters)"


class PqsError(Exception):
    """Base of every error PQS reports to a client."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unauthorized(PqsError):
    code = "unauthorized"


class Forbidden(PqsError):
    code = "forbidden"


class GrantBeyondKey(Forbidden):
    code = "grant_beyond_key"

    def __init__(self, grant: str) -> None:
        super().__init__(f"this API key cannot grant {quote(grant)}: it does not hold all of it itself")


class NotFound(PqsError):
    code = "not_found"


class QueueNotFound(NotFound):
    code = "queue_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"queue {quote(name)} does not exist")


class MoveQueueNotFound(QueueNotFound):
    code = "move_queue_not_found"

    def __init__(self, name: str, role: str) -> None:
        PqsError.__init__(self, f"queue {quote(name)}, the {role} of the move, does not exist")
        self.role = role


class MoveTaskNotFound(NotFound):
    code = "move_task_not_found"


class ReceiptNotFound(NotFound):
    code = "receipt_not_found"


class KeyNotFound(NotFound):
    code = "key_not_found"

    def __init__(self, key_id: str) -> None:
        super().__init__(f"no API key has the id {quote(key_id)}")


class Conflict(PqsError):
    code = "conflict"


class QueueAttributesConflict(Conflict):
    code = "queue_exists"


class QueueInUse(Conflict):
    code = "queue_in_use"


class MoveTaskInProgress(Conflict):
    code = "move_task_in_progress"


class MoveTaskNotRunning(Conflict):
    code = "move_task_not_running"


class KeyRevokesItself(Conflict):
    code = "key_revokes_itself"

    def __init__(self, key_id: str) -> None:
        super().__init__(
            f"key {key_id} cannot revoke itself through the API: use another key that administers `*`,"
            " or `pqs keys revoke`"
        )


class InvalidInput(PqsError):
    code = "invalid_request"


class InvalidQueueName(InvalidInput):
    code = "invalid_queue_name"


class InvalidAttributes(InvalidInput):
    code = "invalid_attributes"


class InvalidMessage(InvalidInput):
    code = "invalid_message"


class InvalidReceiptHandle(InvalidInput):
    code = "invalid_receipt_handle"


class NotADeadLetterQueue(InvalidInput):
    code = "not_a_dead_letter_queue"


class NotAFifoQueue(InvalidInput):
    code = "not_a_fifo_queue"


class TooLarge(PqsError):
    code = "too_large"


class MessageTooLarge(TooLarge):
    code = "message_too_large"


class RequestTooLarge(TooLarge):
    code = "request_too_large"


class Unavailable(PqsError):
    code = "unavailable"
