"""A worker in another language: tests/sqs/node/worker.mjs, written with the AWS SDK for
JavaScript v3, against the served app. `make test` installs Node and the SDK (`make node-deps`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.sqs.harness import REGION, Credentials, SqsServer

WORKER = Path(__file__).parent / "node" / "worker.mjs"
QUEUE = "orders.fifo"


def run_worker(server: SqsServer, credentials: Credentials, run: str) -> dict[str, Any]:
    """Run the worker signing as `credentials`; its JSON summary."""
    node = shutil.which("node")
    if node is None or not (WORKER.parent / "node_modules" / "@aws-sdk" / "client-sqs").is_dir():
        pytest.fail("Node.js or the worker's packages are missing: run `make node-deps`")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PQS_ENDPOINT": server.url,
        "PQS_QUEUE": QUEUE,
        "PQS_RUN": run,
        "AWS_ACCESS_KEY_ID": credentials.key_id,
        "AWS_SECRET_ACCESS_KEY": credentials.secret,
        "AWS_REGION": REGION,
    }
    done = subprocess.run([node, WORKER.name], cwd=WORKER.parent, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def check(summary: dict[str, Any], url: str, run: str) -> None:
    assert summary["queueUrl"] == url
    assert (summary["sent"], summary["batchFailed"]) == (5, [])
    by_group: dict[str, list[str]] = {}
    for message in summary["received"]:
        by_group.setdefault(message["group"], []).append(message["body"])
    # Every message once, each group's in the order sent (the SDK checked every MD5 on the way).
    assert by_group == {
        "a": [f"run {run}: a-{n} ✓" for n in (1, 2, 3)],
        "b": [f"run {run}: b-{n} ✓" for n in (1, 2)],
    }
    assert summary["emptyPoll"]["messages"] == 0
    assert summary["emptyPoll"]["waitedMs"] >= 900, "a long poll of an empty queue waits"


def test_node_worker(sqs_server: SqsServer, admin: Credentials, sqs: Any) -> None:
    # The first run creates the queue; the second runs with a key that may only send, receive and
    # ack on it, and finds its URL with GetQueueUrl (allowed with any scope on the queue).
    first = run_worker(sqs_server, admin, "1")
    url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    check(first, url, "1")
    check(run_worker(sqs_server, sqs_server.key(f"{QUEUE}:send,receive,ack"), "2"), url, "2")
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert got["FifoQueue"] == "true"
    assert (got["ApproximateNumberOfMessages"], got["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0")
