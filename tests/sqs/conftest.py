"""Fixtures of the SQS endpoint's tests: the served app and an admin key with its boto3 client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.sqs.harness import Credentials, SqsServer


@pytest.fixture
def sqs_server(db_url: str) -> Iterator[SqsServer]:
    with SqsServer(db_url) as server:
        yield server


@pytest.fixture
def admin(sqs_server: SqsServer) -> Credentials:
    return sqs_server.key("*:*")


@pytest.fixture
def sqs(sqs_server: SqsServer, admin: Credentials) -> Any:
    """A boto3 SQS client with every action on every queue."""
    return sqs_server.client(admin)
