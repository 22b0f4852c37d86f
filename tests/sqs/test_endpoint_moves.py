"""boto3 against the served app: message move tasks (StartMessageMoveTask, ListMessageMoveTasks,
CancelMessageMoveTask), advanced by the app's maintenance round, with their errors and scopes."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sqs.harness import ACCOUNT, REGION, SqsServer


def arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def refused(call: Any) -> tuple[str, int]:
    """The error code and HTTP status a call is answered with."""
    with pytest.raises(ClientError) as error:
        call()
    response = error.value.response
    return str(response["Error"]["Code"]), int(response["ResponseMetadata"]["HTTPStatusCode"])


def advance(server: SqsServer, seconds: float = 0.0) -> int:
    """One maintenance round of the served app, `seconds` from now; how many messages moved."""
    now = datetime.now(UTC) + timedelta(seconds=seconds)
    return int(server.run(server.app.state.maintenance.run_once(now=now)).moved)


def dead_lettered(sqs: Any, source: str, dlq: str, bodies: list[str]) -> str:
    """Make `source` (a queue with `dlq` as its dead-letter queue after one receive), send
    `bodies` to it and receive each twice: the second receive moves them to the DLQ."""
    policy = json.dumps({"deadLetterTargetArn": arn(dlq), "maxReceiveCount": 1})
    url = sqs.create_queue(QueueName=source, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    for _ in range(2 * len(bodies)):
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return str(url)


def drain(sqs: Any, url: str) -> list[str]:
    found: list[str] = []
    for _ in range(20):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600).get("Messages", [])
        if not got:
            return found
        found += [m["Body"] for m in got]
    raise AssertionError("the queue did not run dry")


def visible(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def held(sqs: Any, url: str) -> int:
    """The messages a queue holds that are not in flight (due now, or later)."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)


def test_dead_letters_go_back_to_their_source(sqs_server: SqsServer, sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
    source = dead_lettered(sqs, "jobs", "jobs-dlq", ["a", "b", "c"])
    assert visible(sqs, dlq) == 3
    started = time.time()
    handle = sqs.start_message_move_task(SourceArn=arn("jobs-dlq"))["TaskHandle"]
    decoded = json.loads(base64.urlsafe_b64decode(handle))
    assert decoded["sourceArn"] == arn("jobs-dlq") and set(decoded) == {"taskId", "sourceArn"}
    [running] = sqs.list_message_move_tasks(SourceArn=arn("jobs-dlq"))["Results"]
    assert running == {
        "TaskHandle": handle,
        "Status": "RUNNING",
        "SourceArn": arn("jobs-dlq"),
        "ApproximateNumberOfMessagesMoved": 0,
        "ApproximateNumberOfMessagesToMove": 3,
        "StartedTimestamp": running["StartedTimestamp"],
    }
    assert abs(running["StartedTimestamp"] / 1000 - started) < 60
    assert advance(sqs_server) == 3
    [done] = sqs.list_message_move_tasks(SourceArn=arn("jobs-dlq"), MaxResults=10)["Results"]
    assert (done["Status"], done["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 3)
    assert "TaskHandle" not in done, "a handle only while the task runs"
    assert sorted(drain(sqs, source)) == ["a", "b", "c"]
    assert drain(sqs, dlq) == []


def test_to_a_destination_at_a_rate_then_cancelled(sqs_server: SqsServer, sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dead_lettered(sqs, "src", "dlq", [f"m{i}" for i in range(10)])
    elsewhere = sqs.create_queue(QueueName="elsewhere")["QueueUrl"]
    answer = sqs.start_message_move_task(
        SourceArn=arn("dlq"), DestinationArn=arn("elsewhere"), MaxNumberOfMessagesPerSecond=1
    )
    moved = advance(sqs_server, seconds=2.5)
    assert moved in (2, 3), moved  # 1 a second, counted from the start (a second or so ago at most)
    [running] = sqs.list_message_move_tasks(SourceArn=arn("dlq"))["Results"]
    assert (running["DestinationArn"], running["MaxNumberOfMessagesPerSecond"]) == (arn("elsewhere"), 1)
    assert running["ApproximateNumberOfMessagesMoved"] == moved
    assert sqs.cancel_message_move_task(TaskHandle=answer["TaskHandle"])["ApproximateNumberOfMessagesMoved"] == moved
    assert advance(sqs_server, seconds=60) == 0
    [cancelled] = sqs.list_message_move_tasks(SourceArn=arn("dlq"))["Results"]
    assert cancelled["Status"] == "CANCELLED"
    # Moved at the round's (future) time: they are due then, counted as delayed until.
    assert held(sqs, elsewhere) == moved
    assert len(drain(sqs, dlq)) == 10 - moved
    # Only a running task stops; the last 10 tasks are listed, newest first.
    assert refused(lambda: sqs.cancel_message_move_task(TaskHandle=answer["TaskHandle"])) == (
        "ResourceNotFoundException",
        404,
    )
    sqs.start_message_move_task(SourceArn=arn("dlq"))
    listed = sqs.list_message_move_tasks(SourceArn=arn("dlq"), MaxResults=10)["Results"]
    assert [t["Status"] for t in listed] == ["RUNNING", "CANCELLED"]


def test_move_task_errors(sqs: Any) -> None:
    sqs.create_queue(QueueName="dlq")
    dead_lettered(sqs, "src", "dlq", ["x"])
    fifo = sqs.create_queue(QueueName="other.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert fifo
    calls = {
        "not a DLQ": lambda: sqs.start_message_move_task(SourceArn=arn("src")),
        "missing source": lambda: sqs.start_message_move_task(SourceArn=arn("missing")),
        "source of another account": lambda: sqs.start_message_move_task(
            SourceArn=f"arn:aws:sqs:{REGION}:123456789012:dlq"
        ),
        "not an ARN": lambda: sqs.start_message_move_task(SourceArn="dlq"),
        "missing destination": lambda: sqs.start_message_move_task(SourceArn=arn("dlq"), DestinationArn=arn("missing")),
        "destination of another kind": lambda: sqs.start_message_move_task(
            SourceArn=arn("dlq"), DestinationArn=arn("other.fifo")
        ),
        "rate 0": lambda: sqs.start_message_move_task(SourceArn=arn("dlq"), MaxNumberOfMessagesPerSecond=0),
        "rate 501": lambda: sqs.start_message_move_task(SourceArn=arn("dlq"), MaxNumberOfMessagesPerSecond=501),
        "list of a missing queue": lambda: sqs.list_message_move_tasks(SourceArn=arn("missing")),
        "MaxResults 0": lambda: sqs.list_message_move_tasks(SourceArn=arn("dlq"), MaxResults=0),
        "MaxResults 11": lambda: sqs.list_message_move_tasks(SourceArn=arn("dlq"), MaxResults=11),
        "a handle of nothing": lambda: sqs.cancel_message_move_task(TaskHandle="foobared"),
        "a handle of no task": lambda: sqs.cancel_message_move_task(
            TaskHandle=handle_of("10f57157-fc38-4da9-a113-4de7e12d05aa", arn("dlq"))
        ),
        "a handle of another account": lambda: sqs.cancel_message_move_task(
            TaskHandle=handle_of("10f57157-fc38-4da9-a113-4de7e12d05dd", f"arn:aws:sqs:{REGION}:878966065785:q")
        ),
    }
    answers = {name: refused(call) for name, call in calls.items()}
    invalid, missing = ("InvalidParameterValue", 400), ("ResourceNotFoundException", 404)
    assert answers == {
        "not a DLQ": invalid,
        "missing source": missing,
        "source of another account": missing,
        "not an ARN": invalid,
        "missing destination": missing,
        "destination of another kind": invalid,
        "rate 0": invalid,
        "rate 501": invalid,
        "list of a missing queue": missing,
        "MaxResults 0": invalid,
        "MaxResults 11": invalid,
        "a handle of nothing": invalid,
        "a handle of no task": missing,
        "a handle of another account": missing,
    }
    sqs.start_message_move_task(SourceArn=arn("dlq"))
    assert refused(lambda: sqs.start_message_move_task(SourceArn=arn("dlq"))) == invalid  # one at a time
    assert sqs.list_message_move_tasks(SourceArn=arn("src"))["Results"] == []


def handle_of(task_id: str, source_arn: str) -> str:
    document = json.dumps({"taskId": task_id, "sourceArn": source_arn})
    return base64.urlsafe_b64encode(document.encode()).decode()


def test_move_tasks_need_admin_on_the_dlq_and_send_where_messages_go(sqs_server: SqsServer, sqs: Any) -> None:
    sqs.create_queue(QueueName="dlq")
    dead_lettered(sqs, "src", "dlq", ["x"])
    sqs.create_queue(QueueName="elsewhere")
    handle = sqs.start_message_move_task(SourceArn=arn("dlq"), MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    sender = sqs_server.client(sqs_server.key("*:send"))
    dlq_admin = sqs_server.client(sqs_server.key("dlq:admin"))
    before = sqs_server.snapshot()
    denied = ("AccessDenied", 403)
    assert refused(lambda: sender.list_message_move_tasks(SourceArn=arn("dlq"))) == denied
    assert refused(lambda: sender.cancel_message_move_task(TaskHandle=handle)) == denied
    assert refused(lambda: sender.start_message_move_task(SourceArn=arn("dlq"))) == denied
    assert sqs_server.snapshot() == before
    sqs.cancel_message_move_task(TaskHandle=handle)
    before = sqs_server.snapshot()
    # admin on the DLQ alone: no send into the source queue, nor into a destination.
    assert refused(lambda: dlq_admin.start_message_move_task(SourceArn=arn("dlq"))) == denied
    assert (
        refused(lambda: dlq_admin.start_message_move_task(SourceArn=arn("dlq"), DestinationArn=arn("elsewhere")))
        == denied
    )
    assert sqs_server.snapshot() == before
    assert len(dlq_admin.list_message_move_tasks(SourceArn=arn("dlq"), MaxResults=10)["Results"]) == 1
    allowed = sqs_server.client(sqs_server.key("dlq:admin", "src:send"))
    allowed.start_message_move_task(SourceArn=arn("dlq"))
    assert advance(sqs_server) == 1


def test_a_move_tasks_destination_is_named_only_to_keys_that_know_of_it(sqs_server: SqsServer, sqs: Any) -> None:
    sqs.create_queue(QueueName="dlq")
    dead_lettered(sqs, "src", "dlq", ["x", "y"])
    sqs.create_queue(QueueName="hidden-dest")
    sqs.start_message_move_task(SourceArn=arn("dlq"), DestinationArn=arn("hidden-dest"), MaxNumberOfMessagesPerSecond=1)
    dlq_reader = sqs_server.client(sqs_server.key("dlq:read"))
    [seen] = dlq_reader.list_message_move_tasks(SourceArn=arn("dlq"))["Results"]
    assert seen["Status"] == "RUNNING" and seen["SourceArn"] == arn("dlq")
    assert "DestinationArn" not in seen, "a reader of the DLQ alone learns no other queue's name"
    # A key with any action on the destination may know it, as the admin who started the task does.
    both = sqs_server.client(sqs_server.key("dlq:read", "hidden-dest:send"))
    [named] = both.list_message_move_tasks(SourceArn=arn("dlq"))["Results"]
    assert named["DestinationArn"] == arn("hidden-dest")
    [own] = sqs.list_message_move_tasks(SourceArn=arn("dlq"))["Results"]
    assert own["DestinationArn"] == arn("hidden-dest")
