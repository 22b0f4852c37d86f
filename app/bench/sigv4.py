"""SigV4 signing for the load generator's SQS requests, as an SDK signs them.

The bench drives the SQS endpoint the way boto3 and the other SDKs do: AWS JSON 1.0, `POST /`,
every request signed with AWS Signature Version 4 in the `Authorization` header. It signs here
rather than through botocore, a dev dependency only (the bench runs from a plain install), and
because botocore's per-request work would be CPU taken from the service on a 2-core machine.

What is signed is what botocore's `SigV4Auth` signs for such a request: the headers `host`,
`content-type`, `x-amz-date` and `x-amz-target` (in that sorted order), the path `/` with no
query, and the SHA-256 of the body. tests/bench/test_sigv4.py checks that the signature equals
botocore's for the same request and that the service's verifier (app/sqs/signature.py) accepts it.
"""

from __future__ import annotations

import hashlib
import hmac
import time

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
SIGNED_HEADERS = "content-type;host;x-amz-date;x-amz-target"


def amz_date(moment: float | None = None) -> str:
    """The SigV4 timestamp (`20261128T120000Z`) of a Unix time (now by default)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if moment is None else moment))


class Signer:
    """Signs `POST /` JSON-protocol requests of one key for one host and region. The derived key
    is kept per day, as SDKs keep it: signing a request is then two SHA-256s and one HMAC."""

    def __init__(self, key_id: str, secret: str, region: str, host: str) -> None:
        self.key_id = key_id
        self.secret = secret
        self.region = region
        self.host = host
        self._day = ""
        self._key = b""

    def _signing_key(self, day: str) -> bytes:
        if day != self._day:
            key = hmac.digest(f"AWS4{self.secret}".encode(), day.encode(), "sha256")
            for part in (self.region, SERVICE, "aws4_request"):
                key = hmac.digest(key, part.encode(), "sha256")
            self._day, self._key = day, key
        return self._key

    def headers(self, target: str, body: bytes, stamp: str | None = None) -> list[tuple[str, str]]:
        """The headers of a signed request (Host included) calling `target`
        (`AmazonSQS.ReceiveMessage`...) with `body`, dated `stamp` (now by default)."""
        stamp = stamp or amz_date()
        day = stamp[:8]
        scope = f"{day}/{self.region}/{SERVICE}/aws4_request"
        canonical = (
            f"POST\n/\n\ncontent-type:{JSON_CONTENT_TYPE}\nhost:{self.host}\nx-amz-date:{stamp}\n"
            f"x-amz-target:{target}\n\n{SIGNED_HEADERS}\n{hashlib.sha256(body).hexdigest()}"
        )
        to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._signing_key(day), to_sign.encode(), "sha256").hexdigest()
        authorization = (
            f"{ALGORITHM} Credential={self.key_id}/{scope}, SignedHeaders={SIGNED_HEADERS}, Signature={signature}"
        )
        return [
            ("Host", self.host),
            ("Content-Type", JSON_CONTENT_TYPE),
            ("X-Amz-Date", stamp),
            ("X-Amz-Target", target),
            ("Authorization", authorization),
        ]
