"""SigV4 verification against requests that botocore really signed: they verify, and each part
tampered with is refused with SQS's error code."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sqs import signature
from app.sqs.signature import SignatureError, canonical_uri, parse_query, verify_request
from tests.sqs.signing import (
    BASE,
    KEY_ID,
    OTHER_KEY_ID,
    OTHER_SECRET,
    REGION,
    SECRETS,
    Received,
    presigned,
    signed,
)

JSON_HEADERS = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"}
JSON_BODY = json.dumps({"QueueUrl": BASE + "/000000000000/orders.fifo", "MessageBody": "héllo ✓ 😀"}).encode()
FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
FORM_BODY = b"Action=SendMessage&Version=2012-11-05&MessageBody=h%C3%A9llo+w%26rld%3D%2B&QueueUrl=http%3A%2F%2Fq"


def refused(received: Received, code: str, now: datetime | None = None, region: str | None = None) -> SignatureError:
    with pytest.raises(SignatureError) as caught:
        received.verify(now, region)
    assert caught.value.code == code, caught.value.message
    return caught.value


# -- what botocore signs verifies -------------------------------------------------------------------

PATHS = [
    "/",
    "",
    "/000000000000/orders",
    "/000000000000/orders.fifo",
    "/000000000000/with%20space",
    "/caf%C3%A9/%E2%9C%93",
    "/a/./b/../c",
    "//double//slashes/",
    "/reserved%2Fslash%3Bsemi%3Dequals",
    "/tilde~and-dash_dot.",
]
QUERIES = [
    "",
    "Action=ListQueues&Version=2012-11-05",
    "a=2&a=1&a=10",
    "q=%E2%9C%93&empty=&z=last",
    "k=a%2Fb%3Dc%26d%2Be%20f",
    "t=~x&u=-_.",
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("query", QUERIES)
def test_a_header_signed_request_verifies_for_any_path_and_query(path: str, query: str) -> None:
    url = BASE + path + ("?" + query if query else "")
    received = signed("POST", url, JSON_BODY, JSON_HEADERS)
    assert received.verify() == KEY_ID


@pytest.mark.parametrize(
    ("body", "headers"),
    [(JSON_BODY, JSON_HEADERS), (FORM_BODY, FORM_HEADERS), (b"", {}), (bytes(range(256)), {"Content-Type": "x/y"})],
    ids=["json-1.0", "form", "empty", "binary"],
)
def test_a_header_signed_request_verifies_for_any_body(body: bytes, headers: dict[str, str]) -> None:
    assert signed("POST", BASE + "/", body, headers).verify() == KEY_ID


def test_parameters_botocore_encodes_itself_verify() -> None:
    """Spaces, unicode and reserved characters put in the URL by botocore's own encoder."""
    params = {"Action": "SendMessage", "MessageBody": "a b+c/d?e&f=g ✓", "Tilde~": "~", "empty": ""}
    received = signed("GET", BASE + "/000000000000/q", params=params)
    assert received.verify() == KEY_ID
    assert dict(parse_query(received.query)) == params


def test_repeated_values_of_a_header_are_joined_in_order_and_trimmed() -> None:
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Custom": "  a   b  "}
    request = signed("POST", BASE + "/", JSON_BODY, headers)
    repeated = replace(request, headers=(*request.headers, ("X-Custom", "\tc  d ")))
    # botocore signed one value; the same request with a second value is another request.
    refused(repeated, "SignatureDoesNotMatch")
    assert request.verify() == KEY_ID


def test_a_header_given_twice_is_signed_as_both_values() -> None:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from tests.sqs.signing import SECRET, _received

    request = AWSRequest(method="POST", url=BASE + "/", data=JSON_BODY)
    request.headers["X-Multi"] = "  first   value "
    request.headers["X-Multi"] = "second"  # the headers object keeps both, as the wire does
    assert request.headers.get_all("X-Multi") == ["  first   value ", "second"]
    SigV4Auth(Credentials(KEY_ID, SECRET), "sqs", REGION).add_auth(request)
    # botocore's own HTTP layer would send one of them; another client or a proxy sends both.
    received = replace(_received(request), headers=(*request.headers.items(), ("Host", "127.0.0.1:9324")))
    assert [v for k, v in received.headers if k == "X-Multi"] == ["  first   value ", "second"]
    assert received.verify() == KEY_ID
    swapped = tuple(
        (k, {"  first   value ": "second", "second": "  first   value "}[v]) if k == "X-Multi" else (k, v)
        for k, v in received.headers
    )
    refused(replace(received, headers=swapped), "SignatureDoesNotMatch")


def test_the_date_header_stands_in_for_x_amz_date() -> None:
    received = signed("POST", BASE + "/", JSON_BODY, {**JSON_HEADERS, "Date": "Mon, 01 Jan 2024 00:00:00 GMT"})
    assert not any(k.lower() == "x-amz-date" for k, _ in received.headers)
    assert parsedate_to_datetime(received.header("Date")).replace(tzinfo=UTC) == received.signed_at
    assert received.verify() == KEY_ID


def test_headers_arrive_as_bytes_from_an_asgi_server() -> None:
    received = signed("POST", BASE + "/000000000000/q", JSON_BODY, JSON_HEADERS)
    key = verify_request(
        method=received.method,
        raw_path=received.path.encode(),
        raw_query=received.query.encode(),
        headers=[(k.lower().encode(), v.encode()) for k, v in received.headers],
        body=received.body,
        now=received.signed_at,
        secret_for=SECRETS.get,
    )
    assert key == KEY_ID


def test_a_signed_content_sha256_must_be_the_body_hash() -> None:
    digest = hashlib.sha256(JSON_BODY).hexdigest()
    good = signed("POST", BASE + "/", JSON_BODY, {**JSON_HEADERS, "X-Amz-Content-SHA256": digest})
    assert good.verify() == KEY_ID
    refused(replace(good, body=JSON_BODY + b" "), "SignatureDoesNotMatch")
    unsigned = signed("POST", BASE + "/", JSON_BODY, {**JSON_HEADERS, "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    refused(unsigned, "IncompleteSignature")


@settings(max_examples=60, deadline=None)
@given(
    segments=st.lists(st.text(min_size=1, max_size=8), max_size=4),
    params=st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=4),
    body=st.binary(max_size=64),
)
def test_any_request_botocore_signs_verifies(segments: list[str], params: dict[str, str], body: bytes) -> None:
    path = "/" + "/".join(quote(segment, safe="") for segment in segments)
    assert signed("POST", BASE + path, body, params=params).verify() == KEY_ID


# -- each part tampered with is refused -------------------------------------------------------------


@pytest.fixture
def request_() -> Received:
    return signed("POST", BASE + "/000000000000/orders?Action=SendMessage&a=1", JSON_BODY, JSON_HEADERS)


def test_tampering_with_a_signed_header_is_refused(request_: Received) -> None:
    refused(request_.with_header("X-Amz-Target", "AmazonSQS.DeleteQueue"), "SignatureDoesNotMatch")
    refused(request_.with_header("Host", "127.0.0.1:9325"), "SignatureDoesNotMatch")


def test_removing_a_signed_header_is_refused(request_: Received) -> None:
    error = refused(request_.without_header("X-Amz-Target"), "SignatureDoesNotMatch")
    assert "x-amz-target" in error.message


def test_an_unsigned_header_added_on_the_way_changes_nothing(request_: Received) -> None:
    assert request_.with_header("X-Forwarded-For", "10.0.0.1").verify() == KEY_ID


def test_tampering_with_the_body_is_refused(request_: Received) -> None:
    refused(replace(request_, body=request_.body.replace(b"h", b"j", 1)), "SignatureDoesNotMatch")
    refused(replace(request_, body=request_.body + b"\n"), "SignatureDoesNotMatch")


def test_tampering_with_the_date_is_refused(request_: Received) -> None:
    later = request_.signed_at + timedelta(seconds=1)
    refused(request_.with_header("X-Amz-Date", later.strftime("%Y%m%dT%H%M%SZ")), "SignatureDoesNotMatch")
    next_day = request_.signed_at + timedelta(days=1)
    error = refused(
        request_.with_header("X-Amz-Date", next_day.strftime("%Y%m%dT%H%M%SZ")), "SignatureDoesNotMatch", now=next_day
    )
    assert "Credential scope" in error.message
    refused(request_.with_header("X-Amz-Date", "2024-01-01T00:00:00Z"), "IncompleteSignature")


def _swap_key_id(request_: Received, key_id: str) -> Received:
    return request_.with_header("Authorization", request_.header("Authorization").replace(KEY_ID, key_id))


def test_tampering_with_the_key_id_is_refused(request_: Received) -> None:
    refused(_swap_key_id(request_, OTHER_KEY_ID), "SignatureDoesNotMatch")
    refused(_swap_key_id(request_, "ffffffffffff"), "InvalidClientTokenId")


def test_a_wrong_secret_is_refused() -> None:
    refused(signed("POST", BASE + "/", JSON_BODY, JSON_HEADERS, secret=OTHER_SECRET), "SignatureDoesNotMatch")
    assert signed("POST", BASE + "/", JSON_BODY, key_id=OTHER_KEY_ID, secret=OTHER_SECRET).verify() == OTHER_KEY_ID


def test_tampering_with_the_path_is_refused(request_: Received) -> None:
    refused(replace(request_, path="/000000000000/other"), "SignatureDoesNotMatch")
    refused(replace(request_, path=request_.path + "/"), "SignatureDoesNotMatch")


def test_tampering_with_the_query_is_refused(request_: Received) -> None:
    refused(replace(request_, query="Action=SendMessage&a=2"), "SignatureDoesNotMatch")
    refused(replace(request_, query="Action=SendMessage&a=1&a=1"), "SignatureDoesNotMatch")
    refused(replace(request_, query="Action=SendMessage"), "SignatureDoesNotMatch")


def test_tampering_with_the_signature_is_refused(request_: Received) -> None:
    authorization = request_.header("Authorization")
    last = authorization[-1]
    flipped = authorization[:-1] + ("0" if last != "0" else "1")
    refused(request_.with_header("Authorization", flipped), "SignatureDoesNotMatch")
    refused(request_.with_header("Authorization", authorization[:-1]), "SignatureDoesNotMatch")
    refused(request_.with_header("Authorization", authorization + "é"), "SignatureDoesNotMatch")


def test_the_scope_must_name_sqs_and_the_expected_region() -> None:
    error = refused(signed("POST", BASE + "/", JSON_BODY, service="sns"), "SignatureDoesNotMatch")
    assert "'sqs'" in error.message
    other_region = signed("POST", BASE + "/", JSON_BODY, region="eu-west-1")
    assert other_region.verify(region=None) == KEY_ID
    refused(other_region, "SignatureDoesNotMatch", region=REGION)
    assert other_region.verify(region="eu-west-1") == KEY_ID


# -- missing and malformed signatures -------------------------------------------------------------


def test_an_unsigned_request_is_missing_its_token(request_: Received) -> None:
    refused(request_.without_header("Authorization"), "MissingAuthenticationToken")


@pytest.mark.parametrize(
    "authorization",
    [
        "AWS {key}:c2lnbmF0dXJl",  # signature version 2
        "AWS4-ECDSA-P256-SHA256 Credential={key}/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00",
        "AWS4-HMAC-SHA256 SignedHeaders=host;x-amz-date, Signature=00",
        "AWS4-HMAC-SHA256 Credential={key}/20240101/us-east-1/sqs/aws4_request, Signature=00",
        "AWS4-HMAC-SHA256 Credential={key}/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host",
        "AWS4-HMAC-SHA256 Credential={key}/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00",
        "AWS4-HMAC-SHA256 Credential={key}/20240101/us-east-1/sqs/aws4_request, SignedHeaders=x-amz-date, Signature=0",
        "AWS4-HMAC-SHA256 Credential={key}/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host;;a, Signature=0",
        "AWS4-HMAC-SHA256 Credential=a, Credential=b, SignedHeaders=host, Signature=00",
    ],
)
def test_a_malformed_authorization_is_an_incomplete_signature(request_: Received, authorization: str) -> None:
    date = request_.signed_at.strftime("%Y%m%d")
    refused(
        request_.with_header("Authorization", authorization.format(key=KEY_ID).replace("20240101", date)),
        "IncompleteSignature",
    )


def test_a_request_without_a_date_is_an_incomplete_signature(request_: Received) -> None:
    refused(request_.without_header("X-Amz-Date"), "IncompleteSignature")


def test_temporary_credentials_are_refused() -> None:
    with_token = signed("POST", BASE + "/", JSON_BODY, JSON_HEADERS, token="FwoGZXIvYXdzE-session")
    assert with_token.header("X-Amz-Security-Token")
    refused(with_token, "InvalidClientTokenId")
    refused(presigned(token="FwoGZXIvYXdzE-session"), "InvalidClientTokenId")


def test_both_forms_at_once_are_refused(request_: Received) -> None:
    url = presigned()
    both = replace(request_, query=url.query)
    refused(both, "IncompleteSignature")


# -- the clock ------------------------------------------------------------------------------------


def test_a_request_within_fifteen_minutes_either_way_verifies(request_: Received) -> None:
    at = request_.signed_at
    for now in (at - timedelta(minutes=15), at, at + timedelta(minutes=15)):
        assert request_.verify(now=now) == KEY_ID


def test_a_request_dated_beyond_fifteen_minutes_is_refused(request_: Received) -> None:
    at = request_.signed_at
    late = refused(request_, "SignatureDoesNotMatch", now=at + timedelta(minutes=15, seconds=1))
    assert late.message.startswith("Signature expired: ")
    assert late.status == 403
    early = refused(request_, "SignatureDoesNotMatch", now=at - timedelta(minutes=15, seconds=1))
    assert early.message.startswith("Signature not yet current: ")


def test_the_clock_is_checked_before_the_key(request_: Received) -> None:
    """An old request is refused for its age whether or not its key exists: no key probing."""
    old = request_.signed_at + timedelta(hours=1)
    refused(_swap_key_id(request_, "ffffffffffff"), "SignatureDoesNotMatch", now=old)


# -- presigned URLs ----------------------------------------------------------------------------------


def test_a_presigned_url_verifies_until_it_expires() -> None:
    url = presigned(BASE + "/000000000000/orders?Action=ReceiveMessage&WaitTimeSeconds=20", expires=300)
    at = url.signed_at
    for now in (at - timedelta(minutes=15), at, at + timedelta(seconds=300)):
        assert url.verify(now=now) == KEY_ID
    expired = refused(url, "RequestExpired", now=at + timedelta(seconds=301))
    assert expired.status == 400
    refused(url, "SignatureDoesNotMatch", now=at - timedelta(minutes=15, seconds=1))


def test_a_tampered_presigned_url_is_refused() -> None:
    url = presigned(BASE + "/000000000000/orders?Action=ReceiveMessage&MaxNumberOfMessages=1")
    refused(
        replace(url, query=url.query.replace("MaxNumberOfMessages=1", "MaxNumberOfMessages=10")),
        "SignatureDoesNotMatch",
    )
    refused(replace(url, query=url.query.replace("X-Amz-Expires=300", "X-Amz-Expires=3000")), "SignatureDoesNotMatch")
    refused(replace(url, path="/000000000000/other"), "SignatureDoesNotMatch")
    refused(replace(url, query=url.query[:-1] + ("0" if url.query[-1] != "0" else "1")), "SignatureDoesNotMatch")
    refused(replace(url, query=url.query.replace(KEY_ID, OTHER_KEY_ID)), "SignatureDoesNotMatch")
    refused(replace(url, query=url.query.replace(KEY_ID, "ffffffffffff")), "InvalidClientTokenId")
    refused(url.with_header("Host", "example.com"), "SignatureDoesNotMatch")


@pytest.mark.parametrize("expires", ["0", "604801", "-5", "1e3", ""])
def test_a_presigned_url_needs_a_valid_expiry(expires: str) -> None:
    url = presigned()
    refused(
        replace(url, query=url.query.replace("X-Amz-Expires=300", f"X-Amz-Expires={expires}")), "IncompleteSignature"
    )


def test_a_presigned_url_needs_every_parameter() -> None:
    url = presigned()
    for name in ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders"):
        query = "&".join(p for p in url.query.split("&") if not p.startswith(name + "="))
        refused(replace(url, query=query), "IncompleteSignature")
    refused(replace(url, query=url.query + "&X-Amz-Expires=300"), "IncompleteSignature")


# -- pieces ---------------------------------------------------------------------------------------


def test_the_canonical_uri_encodes_a_second_time_as_botocore_does_for_sqs() -> None:
    from botocore.auth import SigV4Auth

    signer = SigV4Auth(None, "sqs", REGION)
    for path in PATHS:
        assert canonical_uri(path) == signer._normalize_url_path(path)


def test_the_derived_key_cache_is_bounded() -> None:
    assert signature._signing_key.cache_info().maxsize == 256


@pytest.mark.parametrize("text", ["\x01", "\udcff", "<&>", "x" * 5000])
def test_client_text_an_error_echoes_is_quoted_and_capped(request_: Received, text: str) -> None:
    """Whatever a client sent, an error echoes it as a quoted, bounded, printable string."""
    for broken in (
        request_.with_header("Authorization", text),
        request_.with_header("Authorization", f"AWS4-HMAC-SHA256 {text}"),
        request_.with_header("X-Amz-Date", text),
    ):
        error = refused(broken, "IncompleteSignature")
        assert len(error.message) < 400
        assert error.message.isprintable(), error.message


@pytest.mark.parametrize("name", ["X-Amz-Target", "Content-Type", "X-Amz-Anything"])
def test_an_unsigned_header_that_sigv4_binds_is_refused(name: str) -> None:
    """SigV4 binds x-amz-* headers and the content type: added unsigned, they are refused before
    any secret is looked at, in either form."""
    refused(signed(body=b"{}").with_header(name, "AmazonSQS.PurgeQueue"), "IncompleteSignature")
    refused(presigned().with_header(name, "AmazonSQS.PurgeQueue"), "IncompleteSignature")


# -- the quick path of a header-signed request ------------------------------------------------------

_AUTH_PIECES = st.sampled_from([",", ", ", " ", "\t", "=", "/", ";", "Signature=", "SignedHeaders=", "Credential="])


def _outcome(run: Callable[[], signature.SignedRequest]) -> object:
    try:
        return run()
    except SignatureError as exc:
        return exc.code, exc.message


@settings(max_examples=400)
@given(
    at=st.integers(min_value=0, max_value=200),
    cut=st.integers(min_value=0, max_value=6),
    insert=st.lists(st.one_of(_AUTH_PIECES, st.text(max_size=3)), max_size=3).map("".join),
    signature_text=st.sampled_from(["0" * 64, "a" * 63, "A" * 64, "0" * 64 + ",", "0" * 64 + " ", "f" * 65, ""]),
    keep_signature=st.booleans(),
    skew=st.sampled_from([0, 1, -1, 899, 900, 901, -899, -900, -901, 86_400]),
    region=st.sampled_from([None, REGION, "eu-west-1"]),
)
def test_the_quick_path_answers_as_the_slow_path(
    at: int, cut: int, insert: str, signature_text: str, keep_signature: bool, skew: int, region: str | None
) -> None:
    """The cached parse of the Authorization header's repeated part takes exactly the requests the
    full parse takes, to the same result; any other gets the full parse's error."""
    received = signed("POST", BASE + "/", JSON_BODY, JSON_HEADERS)
    head, _, real_signature = received.header("Authorization").rpartition("Signature=")
    head = head[:at] + insert + head[at + cut :]
    value = head + "Signature=" + (real_signature if keep_signature else signature_text)
    _assert_quick_is_slow(received.with_header("Authorization", value), skew, region)


def _assert_quick_is_slow(received: Received, skew: int = 0, region: str | None = REGION) -> None:
    now = received.signed_at + timedelta(seconds=skew)
    found = signature.header_map(received.headers)
    quick = _outcome(lambda: received.parse(now, region))
    slow = _outcome(
        lambda: signature._parse_header_form_slowly(
            "POST", received.path, [], found, found["authorization"][0], received.body, now, region
        )
    )
    assert quick == slow


@pytest.mark.parametrize(
    "tail",
    [
        ", Signature=0, X=Signature={sig}",  # a second "Signature=" inside another component
        ", Signature={sig},",
        ",Signature={sig}",
        ", \tSignature={sig}",
        " Signature={sig}",
        ", Signature={sig} ",
        ", Signature=Signature={sig}",
    ],
)
def test_the_quick_path_reads_only_a_last_signature_component(tail: str) -> None:
    received = signed("POST", BASE + "/", JSON_BODY, JSON_HEADERS)
    head, _, real_signature = received.header("Authorization").rpartition("Signature=")
    value = head.rstrip(", ") + tail.format(sig=real_signature)
    _assert_quick_is_slow(received.with_header("Authorization", value))


def test_a_botocore_signed_header_takes_the_quick_path() -> None:
    value = signed("POST", BASE + "/", JSON_BODY, JSON_HEADERS).header("Authorization")
    known = signature._known_authorization(value.rpartition("Signature=")[0], REGION)
    assert known is not None and known.key_id == KEY_ID


@given(
    secret=st.text(max_size=50),
    day=st.text(max_size=10),
    region=st.text(max_size=12),
    messages=st.lists(st.text(max_size=200), min_size=2, max_size=3),
)
def test_the_cached_signing_key_signs_each_request_afresh(
    secret: str, day: str, region: str, messages: list[str]
) -> None:
    """Each request's HMAC is SigV4's under the day's derived key, however many requests the
    cached key has served before it (each copies it, none feeds it)."""
    key = hmac.digest(f"AWS4{secret}".encode(), day.encode(), "sha256")
    for part in (region, "sqs", "aws4_request"):
        key = hmac.digest(key, part.encode(), "sha256")
    for message in messages:
        expected = hmac.digest(key, message.encode("utf-8", "surrogateescape"), "sha256").hex()
        request = signature.SignedRequest("key", day, region, message, expected)
        assert signature.check_signature(request, secret) == "key"
