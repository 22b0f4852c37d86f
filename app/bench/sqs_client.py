"""The load generator's side of the SQS endpoint (`pqs bench --api sqs`): requests in the AWS JSON
1.0 protocol, as current SDKs send them, each signed with SigV4 (app/bench/sigv4.py) at the time
it is sent, as an SDK signs it. Bodies are encoded by hand, as the REST client's are; answers
are read only as far as the scenario needs (receipt handles, failed entries)."""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

from app.bench.client import Meter, Samples
from app.bench.http import HttpError, Response, make_http
from app.bench.sigv4 import Signer, amz_date

TARGET = "AmazonSQS."


def _string(text: str) -> str:
    return json.dumps(text, separators=(",", ":"))


def send_message_bytes(queue_url: str, body: str, group_id: str | None = None, dedup_id: str | None = None) -> bytes:
    """The input of SendMessage."""
    extra = ""
    if group_id is not None:
        extra += f',"MessageGroupId":"{group_id}"'
    if dedup_id is not None:
        extra += f',"MessageDeduplicationId":"{dedup_id}"'
    return f'{{"QueueUrl":{_string(queue_url)},"MessageBody":{_string(body)}{extra}}}'.encode()


def send_batch_bytes(
    queue_url: str, body: str, count: int, group_id: str | None = None, dedup_prefix: str | None = None
) -> bytes:
    """The input of SendMessageBatch with `count` entries (ids 0..count-1)."""
    text = _string(body)
    parts = []
    for i in range(count):
        extra = ""
        if group_id is not None:
            extra += f',"MessageGroupId":"{group_id}"'
        if dedup_prefix is not None:
            extra += f',"MessageDeduplicationId":"{dedup_prefix}-{i}"'
        parts.append(f'{{"Id":"{i}","MessageBody":{text}{extra}}}')
    return f'{{"QueueUrl":{_string(queue_url)},"Entries":[{",".join(parts)}]}}'.encode()


def receive_bytes(queue_url: str, max_messages: int, wait_seconds: int) -> bytes:
    """The input of ReceiveMessage."""
    return (
        f'{{"QueueUrl":{_string(queue_url)},"MaxNumberOfMessages":{max_messages},"WaitTimeSeconds":{wait_seconds}}}'
    ).encode()


def delete_batch_bytes(queue_url: str, handles: list[str]) -> bytes:
    """The input of DeleteMessageBatch (receipt handles are base64url: nothing to escape)."""
    entries = ",".join(f'{{"Id":"{i}","ReceiptHandle":"{h}"}}' for i, h in enumerate(handles))
    return f'{{"QueueUrl":{_string(queue_url)},"Entries":[{entries}]}}'.encode()


class SqsApi:
    """The SQS endpoint of the service under test, signing as one key (id and secret)."""

    def __init__(self, base_url: str, key_id: str, secret: str, region: str, http: str = "lean") -> None:
        self.http = make_http(http, base_url)
        self.signer = Signer(key_id, secret, region, urlsplit(base_url).netloc)
        self.urls: dict[str, str] = {}
        # The signing date, made again at most once a second (it has whole seconds).
        self._stamp = ("", 0)

    async def close(self) -> None:
        await self.http.close()

    async def call(self, action: str, content: bytes) -> Response:
        """POST one signed request of `action`."""
        second = int(time.time())
        if self._stamp[1] != second:
            self._stamp = (amz_date(second), second)
        headers = self.signer.headers(TARGET + action, content, self._stamp[0])
        return await self.http.request("POST", "/", content, headers=headers)

    async def queue_url(self, name: str) -> str:
        """The queue's URL (GetQueueUrl, once per queue); fails loudly."""
        url = self.urls.get(name)
        if url is None:
            response = await self.call("GetQueueUrl", f'{{"QueueName":{_string(name)}}}'.encode())
            if response.status_code != 200:
                raise RuntimeError(f"GetQueueUrl {name}: {response.status_code} {response.text[:300]}")
            url = self.urls[name] = json.loads(response.content)["QueueUrl"]
        return url

    async def send(self, action: str, content: bytes, count: int, meter: Meter, samples: Samples | None) -> int:
        """A SendMessage or SendMessageBatch of `count`; how many were accepted."""
        started = time.perf_counter()
        try:
            response = await self.call(action, content)
        except HttpError as exc:
            meter.error(f"send: {exc}")
            return 0
        if samples is not None:
            samples.add(time.perf_counter() - started)
        if response.status_code == 200 and (count == 1 or b'"Failed":[]' in response.content):
            return count
        meter.error(f"send: {response.status_code} {response.text[:200]}")
        return 0

    async def receipts(self, content: bytes, meter: Meter, samples: Samples | None) -> list[str] | None:
        """The receipt handles of one ReceiveMessage (maybe none); None (an error) on failure. Its
        latency goes to `samples` when it returned messages."""
        started = time.perf_counter()
        try:
            response = await self.call("ReceiveMessage", content)
        except HttpError as exc:
            meter.error(f"receive: {exc}")
            return None
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            meter.error(f"receive: {response.status_code} {response.text[:200]}")
            return None
        handles = [m["ReceiptHandle"] for m in json.loads(response.content).get("Messages", ())]
        if samples is not None and handles:
            samples.add(elapsed)
        return handles

    async def delete(self, queue_url: str, handles: list[str], meter: Meter, samples: Samples | None) -> int:
        """DeleteMessageBatch of these receipts; how many were deleted."""
        started = time.perf_counter()
        try:
            response = await self.call("DeleteMessageBatch", delete_batch_bytes(queue_url, handles))
        except HttpError as exc:
            meter.error(f"ack: {exc}")
            return 0
        if samples is not None:
            samples.add(time.perf_counter() - started)
        if response.status_code != 200:
            meter.error(f"ack: {response.status_code} {response.text[:200]}")
            return 0
        if b'"Failed":[]' in response.content:
            return len(handles)
        failed = json.loads(response.content)["Failed"]
        meter.error(f"ack: {len(failed)} entries failed, first: {failed[0]}")
        return len(handles) - len(failed)
