"""The hot operations' dispatch without FastAPI: which operation a request names, and its answer.

`hot_match` reads a request the way the operation table (app/api/operations.py) declares the hot
operations: one pattern compiled from their methods and paths, so it cannot disagree with the
table (nor with the routes FastAPI serves, made from the same rows). `hot_answer` parses and
validates the body with the operation's model, calls its handler, and renders an error as
FastAPI's exception handlers do (the house body, with `error_answer`), 500 included.
`sqs_hot_match` tells the SQS requests of those operations (app/api/lane.py serves them).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from pydantic import ValidationError
from starlette.types import Scope

from app.api.errors import INTERNAL_ERROR, Answer, answer_to, describe_validation, error_answer, undecodable
from app.api.json_body import parse_body
from app.api.operations import BY_ID, OPERATIONS, Operation
from app.errors import PqsError
from app.service.messages import MessageService
from app.service.recipient import Recipient
from app.sqs.actions import SQS_ACTIONS
from app.sqs.protocol import TARGET_PREFIX

log = logging.getLogger(__name__)

# The queue name as FastAPI's path parameter takes it (no slash) within QueueName's bound (1-80
# characters), and no control character (the front answers a path with one 404; the lane, which
# runs before the front, leaves such a path to it).
NAME = r"([^/\x00-\x1f\x7f]{1,80})"


def compile_hot(operations: Iterable[Operation]) -> tuple[re.Pattern[str], dict[tuple[str, str, str], Operation]]:
    """The hot operations' matcher: a pattern of their paths that reads what comes before the
    queue name, the name, and what comes after it; and each hot operation by its method and those
    two parts (what is no operation's matches nothing)."""
    by_parts: dict[tuple[str, str, str], Operation] = {}
    for operation in operations:
        if operation.hot:
            head, found, tail = operation.path.partition("{name}")
            if not found or "{" in head + tail:
                raise ValueError(f"{operation.operation_id}: a hot path has one parameter, {{name}}")
            by_parts[operation.method, head, tail] = operation
    heads = "|".join(re.escape(head) for head in dict.fromkeys(head for _, head, _ in by_parts))
    tails = "|".join(re.escape(tail) for tail in dict.fromkeys(tail for _, _, tail in by_parts))
    return re.compile(f"({heads}){NAME}({tails})"), by_parts


HOT_PATTERN, HOT = compile_hot(OPERATIONS)


def hot_match(scope: Scope) -> tuple[Operation, str] | None:
    """(hot operation, queue name) of a request the hot dispatch serves; None for any other."""
    match = HOT_PATTERN.fullmatch(scope["path"])
    if match is None:
        return None
    operation = HOT.get((scope["method"], match[1], match[3]))
    if operation is None or not _json_content(scope):
        return None
    return operation, match[2]


# The SQS endpoint's row, and the X-Amz-Target of each SQS action whose REST operation is hot
# (SendMessage(Batch), ReceiveMessage, DeleteMessage(Batch), ChangeMessageVisibility(Batch)):
# the hot lane serves those too, from the same table.
SQS_OPERATION = BY_ID["sqs"]
SQS_HOT_TARGETS = frozenset(
    (TARGET_PREFIX + name).encode() for name, action in SQS_ACTIONS.items() if BY_ID[action.operation_id].hot
)


def sqs_hot_match(scope: Scope) -> bool:
    """Whether a request is a JSON-protocol SQS request of a hot action (`POST /` whose
    X-Amz-Target, the first one as the decoder reads it, names one)."""
    if scope["path"] != "/" or scope["method"] != "POST":
        return False
    for name, value in scope["headers"]:
        if name == b"x-amz-target":
            return value.strip() in SQS_HOT_TARGETS
    return False


def _json_content(scope: Scope) -> bool:
    """True when the body is to be read as JSON: no content type, or application/json."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value.split(b";", 1)[0].strip().lower() == b"application/json")
    return True


async def hot_answer(
    messages: MessageService, operation: Operation, name: str, body: bytes, recipient: Recipient | None
) -> Answer:
    """The answer to a hot operation's request, as FastAPI's route answers it."""
    if not body:
        return error_answer(400, "invalid_request", "body: Field required")
    try:
        # As FastAPI's routes read it: it accepts what they accept (a lone surrogate, for one,
        # which the service then refuses per entry rather than failing the batch), and refuses
        # a key given twice in an object.
        document = parse_body(body)
    except (ValueError, RecursionError) as exc:
        return error_answer(400, "invalid_request", undecodable(exc))
    assert operation.request is not None  # every hot operation has one (`hot`)
    try:
        request = operation.request.model_validate(document)
        answer = await operation.handler(messages, name, request, recipient)
    except ValidationError as exc:
        return error_answer(400, "invalid_request", describe_validation(exc.errors()))
    except PqsError as exc:
        return answer_to(exc)
    except Exception:
        log.exception("unhandled error")
        return INTERNAL_ERROR
    return Answer(operation.status, answer)
