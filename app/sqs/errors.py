"""SQS's errors: each with the code the JSON protocol names it by, the code of the query protocol,
whose fault it is, and the HTTP status SQS answers it with.

Sources, taken as facts:

- The errors of SQS's service model (the shapes marked `exception`): their JSON names, and the
  query code and status of each (Smithy's `awsQueryError` and `httpError` traits, as the AWS SDKs
  for JavaScript v3 carry them; the older query model that botocore shipped agrees). Where the
  model gives no query code (InvalidAttributeName, InvalidAttributeValue, InvalidMessageContents,
  InvalidIdFormat), the query code is the name and the status 400, the default for a client
  error. The older model gives no status for ReceiptHandleIsInvalid; the Smithy one gives 404.
- The errors common to all actions: the Common Errors page of the Amazon SQS API Reference
  (InvalidAction, MissingAction, MissingParameter, InvalidParameterValue, InvalidQueryParameter,
  InternalFailure, ServiceUnavailable, AccessDenied...). They have no JSON shape; the JSON
  protocol names them by the same code.
- The signature errors: `app.sqs.signature.AuthFailure` (its sources are there).

`tests/sqs/test_shapes.py` checks this catalogue against the service models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from app.sqs.shapes import BatchResultErrorEntry
from app.sqs.signature import SignatureError

NAMESPACE: Final = "com.amazonaws.sqs"


@dataclass(frozen=True, slots=True)
class ErrorType:
    """One kind of SQS error. `code` is the JSON protocol's `__type` name, `query_code` the code of
    the query protocol (and of the JSON protocol's `x-amzn-query-error` header); `sender` tells a
    client's fault (`Sender`) from the service's (`Receiver`)."""

    code: str
    query_code: str
    status: int
    sender: bool = True

    @property
    def fault(self) -> str:
        return "Sender" if self.sender else "Receiver"


def _modeled(code: str, query_code: str | None = None, status: int = 400) -> ErrorType:
    return ErrorType(code, query_code or code, status)


# The errors of SQS's service model.
BATCH_ENTRY_IDS_NOT_DISTINCT: Final = _modeled(
    "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
)
BATCH_REQUEST_TOO_LONG: Final = _modeled("BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong")
EMPTY_BATCH_REQUEST: Final = _modeled("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest")
INVALID_ADDRESS: Final = _modeled("InvalidAddress", status=404)
INVALID_ATTRIBUTE_NAME: Final = _modeled("InvalidAttributeName")
INVALID_ATTRIBUTE_VALUE: Final = _modeled("InvalidAttributeValue")
INVALID_BATCH_ENTRY_ID: Final = _modeled("InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId")
INVALID_ID_FORMAT: Final = _modeled("InvalidIdFormat")
INVALID_MESSAGE_CONTENTS: Final = _modeled("InvalidMessageContents")
INVALID_SECURITY: Final = _modeled("InvalidSecurity", status=403)
KMS_ACCESS_DENIED: Final = _modeled("KmsAccessDenied", "KMS.AccessDeniedException")
KMS_DISABLED: Final = _modeled("KmsDisabled", "KMS.DisabledException")
KMS_INVALID_KEY_USAGE: Final = _modeled("KmsInvalidKeyUsage", "KMS.InvalidKeyUsageException")
KMS_INVALID_STATE: Final = _modeled("KmsInvalidState", "KMS.InvalidStateException")
KMS_NOT_FOUND: Final = _modeled("KmsNotFound", "KMS.NotFoundException")
KMS_OPT_IN_REQUIRED: Final = _modeled("KmsOptInRequired", "KMS.OptInRequired", status=403)
KMS_THROTTLED: Final = _modeled("KmsThrottled", "KMS.ThrottlingException")
MESSAGE_NOT_INFLIGHT: Final = _modeled("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight")
OVER_LIMIT: Final = _modeled("OverLimit", status=403)
PURGE_QUEUE_IN_PROGRESS: Final = _modeled(
    "PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress", status=403
)
QUEUE_DELETED_RECENTLY: Final = _modeled("QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently")
QUEUE_DOES_NOT_EXIST: Final = _modeled("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue")
QUEUE_NAME_EXISTS: Final = _modeled("QueueNameExists", "QueueAlreadyExists")
RECEIPT_HANDLE_IS_INVALID: Final = _modeled("ReceiptHandleIsInvalid", status=404)
REQUEST_THROTTLED: Final = _modeled("RequestThrottled", status=403)
RESOURCE_NOT_FOUND: Final = _modeled("ResourceNotFoundException", status=404)
TOO_MANY_ENTRIES_IN_BATCH_REQUEST: Final = _modeled(
    "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
)
UNSUPPORTED_OPERATION: Final = _modeled("UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation")

MODELED: Final[tuple[ErrorType, ...]] = (
    BATCH_ENTRY_IDS_NOT_DISTINCT,
    BATCH_REQUEST_TOO_LONG,
    EMPTY_BATCH_REQUEST,
    INVALID_ADDRESS,
    INVALID_ATTRIBUTE_NAME,
    INVALID_ATTRIBUTE_VALUE,
    INVALID_BATCH_ENTRY_ID,
    INVALID_ID_FORMAT,
    INVALID_MESSAGE_CONTENTS,
    INVALID_SECURITY,
    KMS_ACCESS_DENIED,
    KMS_DISABLED,
    KMS_INVALID_KEY_USAGE,
    KMS_INVALID_STATE,
    KMS_NOT_FOUND,
    KMS_OPT_IN_REQUIRED,
    KMS_THROTTLED,
    MESSAGE_NOT_INFLIGHT,
    OVER_LIMIT,
    PURGE_QUEUE_IN_PROGRESS,
    QUEUE_DELETED_RECENTLY,
    QUEUE_DOES_NOT_EXIST,
    QUEUE_NAME_EXISTS,
    RECEIPT_HANDLE_IS_INVALID,
    REQUEST_THROTTLED,
    RESOURCE_NOT_FOUND,
    TOO_MANY_ENTRIES_IN_BATCH_REQUEST,
    UNSUPPORTED_OPERATION,
)


def _common(code: str, status: int = 400, sender: bool = True) -> ErrorType:
    return ErrorType(code, code, status, sender)


# The errors common to all actions (the Common Errors page).
ACCESS_DENIED: Final = _common("AccessDenied", 403)
INTERNAL_FAILURE: Final = _common("InternalFailure", 500, sender=False)
INVALID_ACTION: Final = _common("InvalidAction")
INVALID_PARAMETER_COMBINATION: Final = _common("InvalidParameterCombination")
INVALID_PARAMETER_VALUE: Final = _common("InvalidParameterValue")
INVALID_QUERY_PARAMETER: Final = _common("InvalidQueryParameter")
MISSING_ACTION: Final = _common("MissingAction")
MISSING_PARAMETER: Final = _common("MissingParameter")
SERVICE_UNAVAILABLE: Final = _common("ServiceUnavailable", 503, sender=False)
THROTTLING: Final = _common("ThrottlingException")


class SqsError(Exception):
    """An SQS error to answer a request with, in the protocol the request came in."""

    def __init__(self, error: ErrorType, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message

    @classmethod
    def from_signature(cls, failure: SignatureError) -> SqsError:
        """A failed signature as SQS answers it: the code is the same in both protocols."""
        return cls(_common(failure.code, failure.status), failure.message)

    def __repr__(self) -> str:
        return f"SqsError({self.error.code}, {self.message!r})"


def batch_error(entry_id: str, error: SqsError) -> BatchResultErrorEntry:
    """A failed entry of a batch: SQS names its code by the query code in both protocols."""
    return BatchResultErrorEntry(
        Id=entry_id, SenderFault=error.error.sender, Code=error.error.query_code, Message=error.message
    )
