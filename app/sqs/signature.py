"""Verification of AWS Signature Version 4 requests to the SQS endpoint.

An SDK signs every request with the secret access key of a PQS key; the service recomputes the
signature from the request exactly as received and compares. Both forms are verified: the
`Authorization` header (`AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/sqs/aws4_request,
SignedHeaders=..., Signature=...` with `X-Amz-Date`) and the presigned query (`X-Amz-Algorithm`,
`X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`, `X-Amz-SignedHeaders`, `X-Amz-Signature`).

The canonical request is built the way botocore's `SigV4Auth` builds it for services other than
S3, since that is what every SDK does for SQS:

- the URI is the path as sent (still percent-encoded), with dot segments and repeated slashes
  removed, then percent-encoded once more (only S3 skips that second encoding), `/` and `~` kept;
- the query's names and values are decoded and encoded again with only `A-Z a-z 0-9 - _ . ~`
  left bare, then sorted by name and, for a repeated name, by value. `+` decodes to a space, as
  in the form encoding that `parse_query` (the one parser of a request's parameters) applies;
- header names are lower-cased; a header's values are each trimmed, their inner runs of white
  space made one space, and joined with `,` in the order received;
- the payload hash is the SHA-256 of the body as received; `UNSIGNED-PAYLOAD` and the streaming
  forms are refused, since the body carries the whole SQS request.

Temporary credentials (`X-Amz-Security-Token`) are refused, not ignored: PQS issues no session
tokens, so a request carrying one was made with credentials meant for somewhere else.

Error codes and statuses are SQS's own, taken as facts from these sources:

- `MissingAuthenticationToken` (403), `IncompleteSignature` (400), `InvalidClientTokenId` (403),
  `RequestExpired` (400): the Common Errors page of the Amazon SQS API Reference.
- An unknown access key id: SQS answers 403 `InvalidClientTokenId`, "The security token included
  in the request is invalid." (a real SQS error body quoted in aws/aws-sdk-php-symfony#41).
- A header-signed request dated more than 15 minutes before or after the server's clock: SQS
  answers 403 `SignatureDoesNotMatch`, "Signature expired: <date> is now earlier than <limit>
  (<now> - 15 min.)" (a real SQS error body quoted in aws/aws-sdk-php#642); not `RequestExpired`.
- A presigned URL used after `X-Amz-Date + X-Amz-Expires`: `RequestExpired`, which the Common
  Errors page describes for requests past their expiration date "such as for pre-signed URLs".
"""

from __future__ import annotations

import enum
import functools
import hashlib
import hmac
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote_plus

from app.errors import quote as echo

SERVICE = "sqs"
ALGORITHM = "AWS4-HMAC-SHA256"
TERMINATOR = "aws4_request"
# How far a request's date may stand from the server's clock, either way.
MAX_CLOCK_SKEW = timedelta(minutes=15)
# The longest validity SigV4 allows a presigned URL (seven days).
MAX_PRESIGNED_EXPIRES = 604_800
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_AMZ_DATE = re.compile(r"\d{8}T\d{6}Z")
_AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
# Characters left bare by SigV4's URI encoding (RFC 3986's unreserved set, less the letters and
# digits that quote() never encodes).
_QUERY_SAFE = "-_.~"
_PATH_SAFE = "/~"
_PRESIGN_PARAMS = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)

HeaderPairs = Sequence[tuple[bytes | str, bytes | str]]
# A request's headers by lower-case name, each name's values in the order received: made once per
# request (`header_map`) and read by the signature check and the protocol decoder alike.
HeaderMap = dict[str, list[str]]


class AuthFailure(enum.Enum):
    """SQS's error code for each way a signature fails, with the HTTP status SQS gives it."""

    MISSING_AUTHENTICATION_TOKEN = ("MissingAuthenticationToken", 403)
    INCOMPLETE_SIGNATURE = ("IncompleteSignature", 400)
    INVALID_CLIENT_TOKEN_ID = ("InvalidClientTokenId", 403)
    SIGNATURE_DOES_NOT_MATCH = ("SignatureDoesNotMatch", 403)
    REQUEST_EXPIRED = ("RequestExpired", 400)

    def __init__(self, code: str, status: int) -> None:
        self.code = code
        self.status = status


class SignatureError(Exception):
    """A request whose signature does not authenticate it; `code` and `status` are SQS's."""

    def __init__(self, failure: AuthFailure, message: str) -> None:
        super().__init__(message)
        self.failure = failure
        self.message = message

    @property
    def code(self) -> str:
        return self.failure.code

    @property
    def status(self) -> int:
        return self.failure.status


def _fail(failure: AuthFailure, message: str) -> SignatureError:
    return SignatureError(failure, message)


def _incomplete(message: str) -> SignatureError:
    return SignatureError(AuthFailure.INCOMPLETE_SIGNATURE, message)


def _mismatch(message: str) -> SignatureError:
    return SignatureError(AuthFailure.SIGNATURE_DOES_NOT_MATCH, message)


_SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method."
)
_INVALID_TOKEN = "The security token included in the request is invalid."


def _text(value: bytes | str) -> str:
    # Surrogate escapes carry any byte that is not UTF-8 through to the canonical request
    # unchanged, so the bytes signed are the bytes received.
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def parse_query(raw_query: bytes | str) -> list[tuple[str, str]]:
    """The (name, value) pairs of a query string or form body, decoded, in the order sent.

    The one parser of request parameters: the signature binds exactly what this returns."""
    pairs: list[tuple[str, str]] = []
    if not raw_query:  # the JSON protocol's requests
        return pairs
    for part in _text(raw_query).split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((unquote_plus(name, errors="surrogateescape"), unquote_plus(value, errors="surrogateescape")))
    return pairs


def _encode(text: str, safe: str) -> str:
    return quote(text, safe=safe, errors="surrogateescape")


def canonical_query(pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:  # the JSON protocol's requests
        return ""
    encoded = sorted((_encode(name, _QUERY_SAFE), _encode(value, _QUERY_SAFE)) for name, value in pairs)
    return "&".join(f"{name}={value}" for name, value in encoded)


@functools.lru_cache(maxsize=256)
def canonical_uri(raw_path: bytes | str) -> str:
    """The path as SigV4 signs it for SQS: dot segments and empty segments gone, encoded again.
    Cached: SQS requests go to a handful of paths (`/` above all)."""
    path = _text(raw_path)
    segments: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if segments:
                segments.pop()
        elif segment and segment != ".":
            segments.append(segment)
    normalized = "/" + "/".join(segments)
    if segments and path.endswith("/"):
        normalized += "/"
    return _encode(normalized, _PATH_SAFE)


def header_map(headers: HeaderPairs | HeaderMap) -> HeaderMap:
    """The headers by lower-case name (a map already made is answered as it is)."""
    if isinstance(headers, dict):
        return headers
    found: HeaderMap = {}
    for name, value in headers:
        key = _header_name(name) if len(name) <= 64 else _text(name).lower()
        if isinstance(value, bytes):
            try:
                text = value.decode()  # what the surrogate escapes give a valid UTF-8 value
            except UnicodeDecodeError:
                text = value.decode("utf-8", "surrogateescape")
        else:
            text = value
        values = found.get(key)
        if values is None:
            found[key] = [text]
        else:
            values.append(text)
    return found


@functools.lru_cache(maxsize=256)
def _header_name(name: bytes | str) -> str:
    # Cached (short names only, so the cache stays small): every request of a client sends the
    # same few names, and this runs for each.
    return _text(name).lower()


def _canonical_headers(found: HeaderMap, signed: Sequence[str]) -> str:
    lines = []
    for name in signed:
        values = found.get(name)
        if values is None:
            raise _mismatch(f"The signed header {echo(name)} is not in the request.")
        if len(values) == 1:  # (as SDKs send every header)
            lines.append(f"{name}:{' '.join(values[0].split())}\n")
        else:
            lines.append(name + ":" + ",".join(" ".join(value.split()) for value in values) + "\n")
    return "".join(lines)


@functools.lru_cache(maxsize=64)
def _parse_timestamp(text: str) -> datetime:
    # Cached: a second's requests carry the same timestamp, and strptime is costly.
    if not _AMZ_DATE.fullmatch(text):
        raise _incomplete(f"Date must be in ISO-8601 'basic format'. Got {echo(text)}.")
    try:
        return datetime.strptime(text, _AMZ_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise _incomplete(f"Date must be in ISO-8601 'basic format'. Got {echo(text)}.") from None


def _amz(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_AMZ_DATE_FORMAT)


@dataclass(slots=True)
class SignedRequest:
    """A request's claimed signature and what it must be the HMAC of; no secret needed yet."""

    key_id: str
    scope_date: str
    region: str
    string_to_sign: str
    signature: str


def _check_scope(credential: str, timestamp: str, region: str | None) -> tuple[str, str, str]:
    parts = credential.split("/")
    if len(parts) != 5 or not all(parts):
        raise _incomplete(
            "Credential must have exactly 5 slash-delimited elements, "
            f"e.g. keyid/date/region/service/term, got {echo(credential)}."
        )
    key_id, scope_date, scope_region, service, terminator = parts
    if scope_date != timestamp[:8]:
        raise _mismatch(
            f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"{echo(scope_date)} != '{timestamp[:8]}'."
        )
    if region is not None and scope_region != region:
        raise _mismatch(f"Credential should be scoped to a valid region, not {echo(scope_region)}; this is '{region}'.")
    if service != SERVICE:
        raise _mismatch(f"Credential should be scoped to correct service: '{SERVICE}'.")
    if terminator != TERMINATOR:
        raise _mismatch(f"Credential should be scoped with a valid terminator: '{TERMINATOR}', not {echo(terminator)}.")
    return key_id, scope_date, scope_region


def _refuse_if_stale(signed_at: datetime, now: datetime) -> None:
    if signed_at < now - MAX_CLOCK_SKEW:
        raise _mismatch(
            f"Signature expired: {_amz(signed_at)} is now earlier than {_amz(now - MAX_CLOCK_SKEW)} "
            f"({_amz(now)} - 15 min.)"
        )


def _refuse_if_future(signed_at: datetime, now: datetime) -> None:
    if signed_at > now + MAX_CLOCK_SKEW:
        raise _mismatch(
            f"Signature not yet current: {_amz(signed_at)} is still later than {_amz(now + MAX_CLOCK_SKEW)} "
            f"({_amz(now)} + 15 min.)"
        )


def _signed_header_names(text: str) -> list[str]:
    names = text.split(";")
    if not all(names):
        raise _incomplete(f"SignedHeaders is malformed: {echo(text)}.")
    if "host" not in names:
        raise _incomplete("'Host' must be a 'SignedHeader' in the AWS Authorization.")
    return names


def _refuse_unsigned_controls(found: HeaderMap, signed: Sequence[str]) -> None:
    """SigV4 binds every `x-amz-*` header and `content-type` to the signature: they choose the
    protocol and the action (X-Amz-Target), so one unsigned could be swapped in flight (a signed
    SendMessage replayed as a ReceiveMessage). Every SDK signs them. `x-amz-content-sha256` is
    checked against the body either way, and `x-amz-security-token` is refused before this."""
    _refuse_unsigned_names(tuple(found), tuple(signed))


@functools.lru_cache(maxsize=256)
def _refuse_unsigned_names(names: tuple[str, ...], signed: tuple[str, ...]) -> None:
    # Cached: a client sends the same headers, signed the same way, with every request (an
    # error is raised again each time, never cached).
    for name in names:
        if (name.startswith("x-amz-") or name == "content-type") and name not in signed:
            if name in ("x-amz-content-sha256", "x-amz-security-token"):
                continue
            raise _incomplete(f"The header {echo(name)} is in the request but not among SignedHeaders.")


def _refuse_session_token(found: HeaderMap, query: Sequence[tuple[str, str]]) -> None:
    if "x-amz-security-token" in found or (query and any(name == "X-Amz-Security-Token" for name, _ in query)):
        raise _fail(
            AuthFailure.INVALID_CLIENT_TOKEN_ID,
            _INVALID_TOKEN + " PQS issues no temporary credentials: sign with a PQS key's id and secret.",
        )


def _payload_hash(found: HeaderMap, body: bytes) -> str:
    actual = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
    claimed = found.get("x-amz-content-sha256")
    if claimed is None:
        return actual
    if len(claimed) != 1:
        raise _incomplete("The x-amz-content-sha256 header is given more than once.")
    if claimed[0] == "UNSIGNED-PAYLOAD" or claimed[0].startswith("STREAMING-"):
        raise _incomplete("The body of an SQS request must be signed; an unsigned payload is refused.")
    if not hmac.compare_digest(claimed[0].encode("utf-8", "surrogateescape"), actual.encode()):
        raise _mismatch("The x-amz-content-sha256 header does not match the body received.")
    return actual


def _string_to_sign(
    method: str, uri: str, query: str, canonical_headers: str, signed: str, payload: str, stamp: str, scope: str
) -> str:
    canonical_request = "\n".join((method.upper(), uri, query, canonical_headers, signed, payload))
    digest = hashlib.sha256(canonical_request.encode("utf-8", "surrogateescape")).hexdigest()
    return f"{ALGORITHM}\n{stamp}\n{scope}\n{digest}"


def _parse_authorization(value: str) -> dict[str, str]:
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise _incomplete(f"Unsupported AWS 'algorithm': {echo(algorithm)}; PQS verifies {ALGORITHM} only.")
    fields: dict[str, str] = {}
    for component in rest.split(","):
        name, eq, field = component.strip().partition("=")
        if not eq or name in fields:
            raise _incomplete(f"Authorization header is malformed near {echo(component.strip())}.")
        fields[name] = field
    for required in ("Credential", "SignedHeaders", "Signature"):
        if required not in fields:
            raise _incomplete(f"Authorization header requires '{required}' parameter.")
    return fields


def _header_timestamp(found: HeaderMap) -> str:
    """The request's date as SigV4 signs it: X-Amz-Date, else the Date header (as botocore does)."""
    amz = found.get("x-amz-date")
    if amz is not None:
        if len(amz) != 1:
            raise _incomplete("The X-Amz-Date header is given more than once.")
        return amz[0].strip()
    date = found.get("date")
    if date is None or len(date) != 1:
        raise _incomplete("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
    try:
        moment = parsedate_to_datetime(date[0])
    except (TypeError, ValueError):
        raise _incomplete(f"The Date header is not an HTTP date: {echo(date[0])}.") from None
    # A zone of -0000 (botocore writes it) parses naive; it means UTC, never the server's zone.
    return _amz(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def parse_signed_request(
    *,
    method: str,
    raw_path: bytes | str,
    raw_query: bytes | str,
    headers: HeaderPairs | HeaderMap,
    body: bytes,
    now: datetime,
    region: str | None = None,
) -> SignedRequest:
    """Check everything about a request's signature that needs no secret.

    `raw_path` and `raw_query` are as received (still percent-encoded); `now` is timezone-aware.
    `region`, when given, is the only region a credential scope may name. Raises SignatureError."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    found = header_map(headers)
    query = parse_query(raw_query)
    authorization = found.get("authorization")
    presigned = any(name in _PRESIGN_PARAMS for name, _ in query)
    if authorization is not None and presigned:
        raise _incomplete(
            "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter "
            "or the Authorization header should be specified."
        )
    if authorization is None and not presigned:
        raise _fail(
            AuthFailure.MISSING_AUTHENTICATION_TOKEN,
            "The request must contain either a valid (registered) AWS access key ID or X.509 certificate.",
        )
    _refuse_session_token(found, query)
    if authorization is not None:
        return _parse_header_form(method, raw_path, query, found, authorization, body, now, region)
    return _parse_presigned_form(method, raw_path, query, found, body, now, region)


def _parse_header_form(
    method: str,
    raw_path: bytes | str,
    query: list[tuple[str, str]],
    found: HeaderMap,
    authorization: list[str],
    body: bytes,
    now: datetime,
    region: str | None,
) -> SignedRequest:
    if len(authorization) != 1:
        raise _incomplete("The Authorization header is given more than once.")
    value = authorization[0]
    at = value.rfind("Signature=")
    signature = value[at + 10 :]
    quick = at > 0 and len(signature) == 64 and not signature.strip(_HEX_DIGITS)  # 64 hex digits
    known = _known_authorization(value[:at], region) if quick else None
    if known is None:
        return _parse_header_form_slowly(method, raw_path, query, found, value, body, now, region)
    timestamp = _header_timestamp(found)
    earliest, latest = _window(timestamp)
    if known.scope_date != timestamp[:8] or not earliest <= now <= latest:
        # A check fails: the slow path raises its error, in its order.
        return _parse_header_form_slowly(method, raw_path, query, found, value, body, now, region)
    _refuse_unsigned_controls(found, known.names)
    to_sign = _string_to_sign(
        method,
        canonical_uri(raw_path),
        canonical_query(query),
        _canonical_headers(found, known.names),
        known.signed_headers,
        _payload_hash(found, body),
        timestamp,
        known.scope,
    )
    return SignedRequest(known.key_id, known.scope_date, known.region, to_sign, signature)


@dataclass(frozen=True, slots=True)
class _KnownAuthorization:
    """An Authorization header's fields but the Signature, parsed and checked as far as they can
    be without the request: what a client repeats in every request of a day."""

    key_id: str
    scope_date: str
    region: str
    scope: str  # the Credential after the key id
    signed_headers: str
    names: tuple[str, ...]


# A signature as SDKs write it (64 of these), the only one the quick path takes: nothing in it
# that parsing could read otherwise (no comma, white space or `=`).
_HEX_DIGITS = "0123456789abcdef"


@functools.lru_cache(maxsize=256)
def _known_authorization(head: str, region: str | None) -> _KnownAuthorization | None:
    """The header `head + "Signature=<64 hex digits>"` parsed, when every check that needs no
    request passes; None otherwise (the slow path then finds the error). Cached: the same few
    clients send the same head with every request, and only the signature changes.

    Exact: when `head` ends in a comma (then white space), the Signature is the last component
    and parses alone, so the header parses as `head + "Signature=0"` does, but for its value."""
    if not head.rstrip().endswith(","):
        return None
    try:
        fields = _parse_authorization(head + "Signature=0")
        names = _signed_header_names(fields["SignedHeaders"])
    except SignatureError:
        return None
    credential = fields["Credential"]
    parts = credential.split("/")
    if len(parts) != 5 or not all(parts) or fields["Signature"] != "0":
        return None
    key_id, scope_date, scope_region, service, terminator = parts
    if (region is not None and scope_region != region) or service != SERVICE or terminator != TERMINATOR:
        return None
    scope = credential.partition("/")[2]
    return _KnownAuthorization(key_id, scope_date, scope_region, scope, fields["SignedHeaders"], tuple(names))


@functools.lru_cache(maxsize=64)
def _window(timestamp: str) -> tuple[datetime, datetime]:
    """The clocks at which a request signed at `timestamp` is neither stale nor early (the checks
    of `_refuse_if_stale` and `_refuse_if_future`, turned around); an empty window for a date at
    the calendar's ends, which the slow path answers."""
    signed_at = _parse_timestamp(timestamp)
    try:
        return signed_at - MAX_CLOCK_SKEW, signed_at + MAX_CLOCK_SKEW
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC)


def _parse_header_form_slowly(
    method: str,
    raw_path: bytes | str,
    query: list[tuple[str, str]],
    found: HeaderMap,
    value: str,
    body: bytes,
    now: datetime,
    region: str | None,
) -> SignedRequest:
    fields = _parse_authorization(value)
    timestamp = _header_timestamp(found)
    signed_at = _parse_timestamp(timestamp)
    key_id, scope_date, scope_region = _check_scope(fields["Credential"], timestamp, region)
    _refuse_if_stale(signed_at, now)
    _refuse_if_future(signed_at, now)
    signed = _signed_header_names(fields["SignedHeaders"])
    _refuse_unsigned_controls(found, signed)
    to_sign = _string_to_sign(
        method,
        canonical_uri(raw_path),
        canonical_query(query),
        _canonical_headers(found, signed),
        fields["SignedHeaders"],
        _payload_hash(found, body),
        timestamp,
        fields["Credential"].partition("/")[2],
    )
    return SignedRequest(key_id, scope_date, scope_region, to_sign, fields["Signature"])


def _parse_presigned_form(
    method: str,
    raw_path: bytes | str,
    query: list[tuple[str, str]],
    found: HeaderMap,
    body: bytes,
    now: datetime,
    region: str | None,
) -> SignedRequest:
    params: dict[str, str] = {}
    for name, value in query:
        if name in _PRESIGN_PARAMS:
            if name in params:
                raise _incomplete(f"The query parameter '{name}' is given more than once.")
            params[name] = value
    for name in _PRESIGN_PARAMS:
        if name not in params:
            raise _incomplete(f"AWS query-string parameters must include '{name}'. Re-examine the query-string.")
    if params["X-Amz-Algorithm"] != ALGORITHM:
        raise _incomplete(f"Unsupported AWS 'algorithm': {echo(params['X-Amz-Algorithm'])}; PQS verifies {ALGORITHM}.")
    timestamp = params["X-Amz-Date"]
    signed_at = _parse_timestamp(timestamp)
    key_id, scope_date, scope_region = _check_scope(params["X-Amz-Credential"], timestamp, region)
    expires_text = params["X-Amz-Expires"]
    if not expires_text.isascii() or not expires_text.isdigit() or not 1 <= int(expires_text) <= MAX_PRESIGNED_EXPIRES:
        raise _incomplete(f"X-Amz-Expires must be a whole number of seconds from 1 to {MAX_PRESIGNED_EXPIRES}.")
    if signed_at > now + MAX_CLOCK_SKEW:
        _refuse_if_stale(signed_at, now)
    _refuse_if_future(signed_at, now)
    if now > signed_at + timedelta(seconds=int(expires_text)):
        raise _fail(AuthFailure.REQUEST_EXPIRED, "Request has expired.")
    signed = _signed_header_names(params["X-Amz-SignedHeaders"])
    _refuse_unsigned_controls(found, signed)
    to_sign = _string_to_sign(
        method,
        canonical_uri(raw_path),
        canonical_query([(name, value) for name, value in query if name != "X-Amz-Signature"]),
        _canonical_headers(found, signed),
        params["X-Amz-SignedHeaders"],
        hashlib.sha256(body).hexdigest(),
        timestamp,
        params["X-Amz-Credential"].partition("/")[2],
    )
    return SignedRequest(key_id, scope_date, scope_region, to_sign, params["X-Amz-Signature"])


@functools.lru_cache(maxsize=256)
def _signing_key(secret: str, scope_date: str, region: str) -> hmac.HMAC:
    """SigV4's derived key, as an HMAC keyed with it and fed nothing yet: it changes only with
    the day, so one derivation serves a day's requests, and each request's HMAC is a copy of
    this one (the key's pads already hashed: a third of the cost of keying a new HMAC). The
    cache holds secrets the server holds anyway, bounded in count."""
    key = hmac.digest(f"AWS4{secret}".encode(), scope_date.encode(), "sha256")
    for part in (region, SERVICE, TERMINATOR):
        key = hmac.digest(key, part.encode(), "sha256")
    return hmac.new(key, digestmod="sha256")


def check_signature(request: SignedRequest, secret: str | None) -> str:
    """The key id when `secret` (None: no such key) signed `request`, else SignatureError."""
    if secret is None:
        raise _fail(AuthFailure.INVALID_CLIENT_TOKEN_ID, _INVALID_TOKEN)
    key = _signing_key(secret, request.scope_date, request.region)
    keyed = key.copy()
    keyed.update(request.string_to_sign.encode("utf-8", "surrogateescape"))
    expected = keyed.hexdigest()
    if not hmac.compare_digest(expected.encode(), request.signature.encode("utf-8", "surrogateescape")):
        raise _mismatch(_SIGNATURE_MISMATCH)
    return request.key_id


def verify_request(
    *,
    method: str,
    raw_path: bytes | str,
    raw_query: bytes | str,
    headers: HeaderPairs,
    body: bytes,
    now: datetime,
    secret_for: Callable[[str], str | None],
    region: str | None = None,
) -> str:
    """The id of the key that signed this request; SignatureError with SQS's code otherwise."""
    request = parse_signed_request(
        method=method, raw_path=raw_path, raw_query=raw_query, headers=headers, body=body, now=now, region=region
    )
    return check_signature(request, secret_for(request.key_id))
