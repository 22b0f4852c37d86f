"""Dependency aliases for the routes (async: sync dependencies would run in a thread pool)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from app.service.activity import ActivityService
from app.service.messages import MessageService
from app.service.queues import QueueService


async def _queues(request: Request) -> QueueService:
    service: QueueService = request.app.state.queues
    return service


async def _messages(request: Request) -> MessageService:
    service: MessageService = request.app.state.messages
    return service


async def _activity(request: Request) -> ActivityService:
    service: ActivityService = request.app.state.activity
    return service


QueuesDep = Annotated[QueueService, Depends(_queues)]
MessagesDep = Annotated[MessageService, Depends(_messages)]
ActivityDep = Annotated[ActivityService, Depends(_activity)]
QueueName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=80,
        description="Queue name: 1-75 of [A-Za-z0-9_-], plus `.fifo` for FIFO queues.",
        examples=["jobs.fifo"],
    ),
]
