"""Requests signed by botocore, the signer boto3 and the aws CLI use, and handed to the verifier
as a server receives them: raw path, raw query, header pairs, body bytes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from app.sqs.signature import SignedRequest, check_signature, parse_signed_request

KEY_ID = "0123456789ab"
SECRET = "zV6rN0l2Rj3Yc9wWqK1mT5uH8pXsA4dE7fGiJoLbQ_c"
OTHER_KEY_ID = "ba9876543210"
OTHER_SECRET = "Another-secret-of-another-key-0000000000000"
SECRETS = {KEY_ID: SECRET, OTHER_KEY_ID: OTHER_SECRET}
REGION = "us-east-1"
BASE = "http://127.0.0.1:9324"


@dataclass(frozen=True)
class Received:
    """One request as the server sees it."""

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    signed_at: datetime  # when botocore signed it: the verifier's default `now`

    def header(self, name: str) -> str:
        return next(v for k, v in self.headers if k.lower() == name.lower())

    def with_header(self, name: str, value: str) -> Received:
        kept = tuple((k, v) for k, v in self.headers if k.lower() != name.lower())
        return replace(self, headers=(*kept, (name, value)))

    def without_header(self, name: str) -> Received:
        return replace(self, headers=tuple((k, v) for k, v in self.headers if k.lower() != name.lower()))

    def parse(self, now: datetime | None = None, region: str | None = None) -> SignedRequest:
        return parse_signed_request(
            method=self.method,
            raw_path=self.path,
            raw_query=self.query,
            headers=self.headers,
            body=self.body,
            now=self.signed_at if now is None else now,
            region=region,
        )

    def verify(self, now: datetime | None = None, region: str | None = None) -> str:
        request = self.parse(now, region)
        return check_signature(request, SECRETS.get(request.key_id))


def _received(request: AWSRequest) -> Received:
    signed_at = datetime.strptime(request.context["timestamp"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    prepared = request.prepare()
    parts = urlsplit(prepared.url)
    headers = list(prepared.headers.items())
    if not any(name.lower() == "host" for name, _ in headers):
        # What the HTTP client adds on the wire, and what botocore signed in its place.
        headers.append(("Host", parts.netloc))
    body = prepared.body or b""
    if isinstance(body, str):
        body = body.encode()
    return Received(prepared.method, parts.path, parts.query, tuple(headers), body, signed_at)


def signed(
    method: str = "POST",
    url: str = BASE + "/",
    body: bytes | str = b"",
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    *,
    key_id: str = KEY_ID,
    secret: str = SECRET,
    token: str | None = None,
    region: str = REGION,
    service: str = "sqs",
) -> Received:
    """A request signed with the Authorization header, as SigV4Auth signs it."""
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {}, params=params or {})
    SigV4Auth(Credentials(key_id, secret, token), service, region).add_auth(request)
    return _received(request)


def presigned(
    url: str = BASE + "/",
    expires: int = 300,
    *,
    key_id: str = KEY_ID,
    secret: str = SECRET,
    token: str | None = None,
    region: str = REGION,
) -> Received:
    """A GET presigned in its query, as SigV4QueryAuth signs it."""
    request = AWSRequest(method="GET", url=url)
    SigV4QueryAuth(Credentials(key_id, secret, token), "sqs", region, expires=expires).add_auth(request)
    return _received(request)
