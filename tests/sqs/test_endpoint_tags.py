"""boto3 against the served app: queue tags (TagQueue, UntagQueue, ListQueueTags, CreateQueue's
tags) and ListDeadLetterSourceQueues, with their limits, errors and scopes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sqs.harness import ACCOUNT, REGION, SqsServer


def code_of(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_tag_untag_list(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="tagged")["QueueUrl"]
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)
    sqs.tag_queue(QueueUrl=url, Tags={"team": "pay", "env": "prod", "empty": ""})
    sqs.tag_queue(QueueUrl=url, Tags={"env": "staging"})  # a key tagged again takes the new value
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "pay", "env": "staging", "empty": ""}
    sqs.untag_queue(QueueUrl=url, TagKeys=["env", "never-set"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "pay", "empty": ""}
    sqs.delete_queue(QueueUrl=url)
    url = sqs.create_queue(QueueName="tagged")["QueueUrl"]
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url), "a queue's tags go with it"


def test_create_queue_with_tags(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="born-tagged", tags={"team": "pay"})["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "pay"}
    # Only attributes decide whether CreateQueue matches an existing queue; its tags stay.
    assert sqs.create_queue(QueueName="born-tagged", tags={"team": "other"})["QueueUrl"] == url
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "pay"}
    with pytest.raises(ClientError) as error:
        sqs.create_queue(QueueName="too-tagged", tags={f"k{i}": "v" for i in range(51)})
    assert code_of(error) == "InvalidParameterValue"
    with pytest.raises(ClientError) as error:
        sqs.get_queue_url(QueueName="too-tagged")
    assert code_of(error) == "AWS.SimpleQueueService.NonExistentQueue"


def test_tag_limits(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="limits")["QueueUrl"]
    sqs.tag_queue(QueueUrl=url, Tags={"k" * 128: "v" * 256})
    sqs.tag_queue(QueueUrl=url, Tags={f"t{i}": str(i) for i in range(49)})
    assert len(sqs.list_queue_tags(QueueUrl=url)["Tags"]) == 50
    sqs.tag_queue(QueueUrl=url, Tags={"t0": "replaced"})  # replacing a key adds no tag
    before = sqs_server.snapshot()
    for tags in ({"one-more": "x"}, {"k" * 129: "v"}, {"": "v"}, {"k": "v" * 257}, {"nul\x00": "v"}):
        with pytest.raises(ClientError) as error:
            sqs.tag_queue(QueueUrl=url, Tags=tags)
        assert code_of(error) == "InvalidParameterValue", tags
    with pytest.raises(ClientError) as error:
        sqs.untag_queue(QueueUrl=url, TagKeys=["k" * 129])
    assert code_of(error) == "InvalidParameterValue"
    assert sqs_server.snapshot() == before
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"]["t0"] == "replaced"


def test_tags_of_a_missing_queue(sqs: Any) -> None:
    missing = f"http://localhost/{ACCOUNT}/missing"
    calls = (
        lambda: sqs.tag_queue(QueueUrl=missing, Tags={"a": "b"}),
        lambda: sqs.untag_queue(QueueUrl=missing, TagKeys=["a"]),
        lambda: sqs.list_queue_tags(QueueUrl=missing),
        lambda: sqs.list_dead_letter_source_queues(QueueUrl=missing),
    )
    for call in calls:
        with pytest.raises(ClientError) as error:
            call()
        assert code_of(error) == "AWS.SimpleQueueService.NonExistentQueue"


def test_tags_need_admin(sqs_server: SqsServer, sqs: Any) -> None:
    url = sqs.create_queue(QueueName="jobs", tags={"team": "pay"})["QueueUrl"]
    dlq = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
    sender = sqs_server.client(sqs_server.key("jobs*:send"))
    before = sqs_server.snapshot()
    calls = (
        lambda: sender.tag_queue(QueueUrl=url, Tags={"a": "b"}),
        lambda: sender.untag_queue(QueueUrl=url, TagKeys=["team"]),
        lambda: sender.list_queue_tags(QueueUrl=url),
        lambda: sender.list_dead_letter_source_queues(QueueUrl=dlq),
    )
    for call in calls:
        with pytest.raises(ClientError) as error:
            call()
        assert code_of(error) == "AccessDenied"
    assert sqs_server.snapshot() == before
    admin = sqs_server.client(sqs_server.key("jobs:admin"))
    admin.tag_queue(QueueUrl=url, Tags={"a": "b"})
    assert admin.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "pay", "a": "b"}


def test_list_dead_letter_source_queues(sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:dlq"
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == []
    sources = [
        sqs.create_queue(QueueName=f"src-{i}", Attributes={"RedrivePolicy": policy})["QueueUrl"] for i in range(5)
    ]
    sqs.create_queue(QueueName="unrelated")
    answer = sqs.list_dead_letter_source_queues(QueueUrl=dlq)
    assert answer["queueUrls"] == sources
    assert "NextToken" not in answer, "without MaxResults: every source, no NextToken (as SQS)"
    pages, token = [], None
    for _ in range(10):
        page = sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=2, **({"NextToken": token} if token else {}))
        pages.append(page["queueUrls"])
        token = page.get("NextToken")
        if token is None:
            break
    assert pages == [sources[:2], sources[2:4], sources[4:]]
    for bad in ({"MaxResults": 0}, {"MaxResults": 1001}, {"MaxResults": 2, "NextToken": "abc"}):
        with pytest.raises(ClientError) as error:
            sqs.list_dead_letter_source_queues(QueueUrl=dlq, **bad)
        assert code_of(error) == "InvalidParameterValue", bad


def test_dead_letter_sources_name_only_queues_the_caller_administers(sqs_server: SqsServer, sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    policy = json.dumps({"deadLetterTargetArn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:dlq", "maxReceiveCount": 3})
    mine = sqs.create_queue(QueueName="team-a-jobs", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.create_queue(QueueName="team-b-secret", Attributes={"RedrivePolicy": policy})
    team_a = sqs_server.client(sqs_server.key("dlq:admin", "team-a-*:admin"))
    assert team_a.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [mine]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] != [mine], "the admin key sees both"
