"""The SQS endpoint's access control: signatures, keys and scopes, through boto3, the aws CLI and
a hand-signed query-protocol request. A refused request changes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials
from botocore.exceptions import ClientError

from app.access import parse_grant
from app.api.operations import BY_ID, SQS_SCOPES
from app.config import Settings
from app.main import create_app
from app.service.keys import create_key, revoke_key
from app.sqs.actions import SQS_ACTIONS
from tests.sqs.harness import ACCOUNT, REGION, Credentials, SqsServer


def code_of(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


@pytest.fixture
def uncached(db_url: str) -> Any:
    """A server that trusts no verdict about a key (PQS_AUTH_CACHE_SECONDS=0)."""
    with SqsServer(db_url, auth_cache_seconds=0) as server:
        yield server


def refused(server: SqsServer, client: Any, code: str) -> None:
    """Every kind of call of `client` is refused with `code`, and changes nothing."""
    before = server.snapshot()
    url = f"{server.url}/{ACCOUNT}/jobs"
    for call in (
        lambda: client.send_message(QueueUrl=url, MessageBody="x"),
        lambda: client.receive_message(QueueUrl=url),
        lambda: client.create_queue(QueueName="new"),
        lambda: client.purge_queue(QueueUrl=url),
    ):
        with pytest.raises(ClientError) as error:
            call()
        assert code_of(error) == code
        assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert server.snapshot() == before


def test_wrong_secret_unknown_key_and_key_without_secret(sqs_server: SqsServer, sqs: Any, admin: Credentials) -> None:
    sqs.create_queue(QueueName="jobs")
    sqs.send_message(QueueUrl=f"{sqs_server.url}/{ACCOUNT}/jobs", MessageBody="kept")
    # Another last character (a random secret ends in "A" one time in 64).
    wrong = admin.secret[:-1] + ("B" if admin.secret.endswith("A") else "A")
    refused(sqs_server, sqs_server.client(admin, secret=wrong), "SignatureDoesNotMatch")
    unknown = Credentials("0123456789ab", admin.secret, "")
    refused(sqs_server, sqs_server.client(unknown), "InvalidClientTokenId")
    db = sqs_server.app.state.db
    stored, _ = sqs_server.run(db.run(lambda conn: create_key(conn, "bearer only", (parse_grant("*:*"),))))
    refused(sqs_server, sqs_server.client(Credentials(stored.key_id, admin.secret, "")), "InvalidClientTokenId")


def test_a_revoked_key_is_refused(uncached: SqsServer) -> None:
    key = uncached.key("*:*")
    client = uncached.client(key)
    client.create_queue(QueueName="jobs")
    uncached.run(uncached.app.state.db.run(lambda conn: revoke_key(conn, key.key_id)))
    refused(uncached, client, "InvalidClientTokenId")


def test_scopes_decide_actions(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.create_queue(QueueName="other")
    sender = sqs_server.client(sqs_server.key("jobs:send"))
    sender.send_message(QueueUrl=url, MessageBody="allowed")
    sender.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "also"}])
    before = sqs_server.snapshot()
    for call in (
        lambda: sender.receive_message(QueueUrl=url),
        lambda: sender.create_queue(QueueName="jobs"),
        lambda: sender.list_queues(),
        lambda: sender.delete_message(QueueUrl=url, ReceiptHandle="x"),
        lambda: sender.send_message(QueueUrl=url.replace("/jobs", "/other"), MessageBody="elsewhere"),
    ):
        with pytest.raises(ClientError) as error:
            call()
        assert code_of(error) == "AccessDenied"
        assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert sqs_server.snapshot() == before
    worker = sqs_server.client(sqs_server.key("jobs:receive,ack"))
    messages = worker.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 2
    for m in messages:
        worker.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_get_queue_url_needs_any_action_on_the_queue(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.create_queue(QueueName="other")
    for scope in ("jobs:send", "jobs:receive", "job?:ack", "*:admin"):
        assert sqs_server.client(sqs_server.key(scope)).get_queue_url(QueueName="jobs")["QueueUrl"] == url, scope
    # A key that may do nothing on a queue learns nothing of it: an existing queue answers as
    # one that does not exist.
    sender = sqs_server.client(sqs_server.key("jobs:send"))
    answers = []
    for name in ("other", "missing"):
        with pytest.raises(ClientError) as error:
            sender.get_queue_url(QueueName=name)
        answers.append((code_of(error), error.value.response["Error"]["Message"]))
    assert (
        answers[0] == answers[1] == ("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")
    )
    # Only GetQueueUrl: the queue's attributes still need read (or admin).
    with pytest.raises(ClientError) as error:
        sender.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    assert code_of(error) == "AccessDenied"


def test_a_read_key_looks_through_sqs_and_changes_nothing(sqs_server: SqsServer, sqs: Any) -> None:
    dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
    policy = f'{{"deadLetterTargetArn": "arn:aws:sqs:{REGION}:{ACCOUNT}:jobs-dlq", "maxReceiveCount": 2}}'
    url = sqs.create_queue(QueueName="jobs", Attributes={"RedrivePolicy": policy}, tags={"team": "a"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    reader = sqs_server.client(sqs_server.key("*:read"))
    assert set(reader.list_queues()["QueueUrls"]) == {url, dlq_url}
    attributes = reader.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "1"
    assert reader.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "a"}
    assert reader.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"] == [url]
    dlq_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:jobs-dlq"
    assert reader.list_message_move_tasks(SourceArn=dlq_arn)["Results"] == []
    before = sqs_server.snapshot()
    for call in (
        lambda: reader.send_message(QueueUrl=url, MessageBody="y"),
        lambda: reader.receive_message(QueueUrl=url),
        lambda: reader.purge_queue(QueueUrl=url),
        lambda: reader.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "9"}),
        lambda: reader.tag_queue(QueueUrl=url, Tags={"b": "c"}),
        lambda: reader.delete_queue(QueueUrl=url),
        lambda: reader.create_queue(QueueName="new"),
        lambda: reader.start_message_move_task(SourceArn=dlq_arn),
    ):
        with pytest.raises(ClientError) as error:
            call()
        assert code_of(error) == "AccessDenied"
    assert sqs_server.snapshot() == before


def test_a_dead_letter_queue_needs_admin_on_it_too(sqs_server: SqsServer, sqs: Any) -> None:
    sqs.create_queue(QueueName="secret-dlq")
    jobs_admin = sqs_server.client(sqs_server.key("jobs*:admin"))
    policy = f'{{"deadLetterTargetArn": "arn:aws:sqs:{REGION}:{ACCOUNT}:secret-dlq", "maxReceiveCount": 2}}'
    with pytest.raises(ClientError) as error:
        jobs_admin.create_queue(QueueName="jobs-1", Attributes={"RedrivePolicy": policy})
    assert code_of(error) == "AccessDenied"
    assert "QueueUrls" in sqs.list_queues() and len(sqs.list_queues()["QueueUrls"]) == 1


def test_the_query_protocol_signed_by_botocore(sqs_server: SqsServer, admin: Credentials) -> None:
    body = urlencode({"Action": "CreateQueue", "QueueName": "by-query", "Version": "2012-11-05"})
    request = AWSRequest(
        method="POST",
        url=sqs_server.url + "/",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    SigV4Auth(BotoCredentials(admin.key_id, admin.secret), "sqs", REGION).add_auth(request)
    answer = httpx.post(sqs_server.url + "/", content=body, headers=dict(request.headers.items()))
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/xml")
    assert f"<QueueUrl>{sqs_server.url}/{ACCOUNT}/by-query</QueueUrl>" in answer.text
    unsigned = httpx.post(
        sqs_server.url + "/", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert unsigned.status_code == 403 and "<Code>MissingAuthenticationToken</Code>" in unsigned.text


def _aws_cli() -> str | None:
    found = Path(sys.executable).with_name("aws")
    return str(found) if found.exists() else shutil.which("aws")


@pytest.mark.skipif(_aws_cli() is None, reason="the aws CLI (PyPI awscli, in the dev extra) is not installed")
def test_the_aws_cli_long_polls(sqs_server: SqsServer, sqs: Any, admin: Credentials, tmp_path: Path) -> None:
    url = sqs.create_queue(QueueName="cli")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="for the CLI")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "AWS_ACCESS_KEY_ID": admin.key_id,
        "AWS_SECRET_ACCESS_KEY": admin.secret,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
    }
    aws = _aws_cli()
    assert aws is not None
    done = subprocess.run(
        [aws, "sqs", "receive-message", "--endpoint-url", sqs_server.url, "--queue-url", url,
         "--wait-time-seconds", "1", "--output", "json"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"Body": "for the CLI"' in done.stdout


def test_a_presigned_query_url_works_until_it_expires(sqs_server: SqsServer, sqs: Any, admin: Credentials) -> None:
    sqs.create_queue(QueueName="listed")
    query = urlencode({"Action": "ListQueues", "Version": "2012-11-05"})
    request = AWSRequest(method="GET", url=f"{sqs_server.url}/?{query}")
    SigV4QueryAuth(BotoCredentials(admin.key_id, admin.secret), "sqs", REGION, expires=60).add_auth(request)
    answer = httpx.get(request.url)
    assert answer.status_code == 200, answer.text
    assert f"<QueueUrl>{sqs_server.url}/{ACCOUNT}/listed</QueueUrl>" in answer.text
    tampered = httpx.get(request.url.replace("ListQueues", "ListQueuez"))
    assert tampered.status_code == 403 and "<Code>SignatureDoesNotMatch</Code>" in tampered.text
    expired = AWSRequest(method="GET", url=f"{sqs_server.url}/?{query}")
    SigV4QueryAuth(BotoCredentials(admin.key_id, admin.secret), "sqs", REGION, expires=1).add_auth(expired)
    time.sleep(2.1)
    late = httpx.get(expired.url)
    assert late.status_code == 400 and "<Code>RequestExpired</Code>" in late.text


def test_each_sqs_action_needs_the_scope_of_its_rest_operation() -> None:
    assert {
        "SendMessage": "send",
        "SendMessageBatch": "send",
        "ReceiveMessage": "receive",
        "DeleteMessage": "ack",
        "DeleteMessageBatch": "ack",
        "ChangeMessageVisibility": "ack",
        "ChangeMessageVisibilityBatch": "ack",
        "GetQueueUrl": "any",
        **dict.fromkeys(
            ("CreateQueue", "DeleteQueue", "SetQueueAttributes", "PurgeQueue", "TagQueue", "UntagQueue",
             "StartMessageMoveTask", "CancelMessageMoveTask"),
            "admin",
        ),
        **dict.fromkeys(
            ("ListQueues", "GetQueueAttributes", "ListQueueTags", "ListDeadLetterSourceQueues",
             "ListMessageMoveTasks"),
            "read",
        ),
    } == SQS_SCOPES  # fmt: skip
    assert {a.operation_id for a in SQS_ACTIONS.values()} <= set(BY_ID)
    paths = create_app(Settings(database_url="postgresql://unused/unused")).openapi()["paths"]
    assert "/" not in paths, "the SQS endpoint is not part of the REST API's document"
