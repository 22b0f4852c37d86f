"""Small factories with defaults for building test data."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

from app.domain import DeadLetter, QueueAttributes, SendEntry
from app.service.queues import QueueService

_counter = itertools.count(1)


def unique(prefix: str = "q") -> str:
    """A name no other call in this process returns."""
    return f"{prefix}-{next(_counter)}"


async def make_queue(
    queues: QueueService,
    *,
    fifo: bool = False,
    name: str | None = None,
    dead_letter: DeadLetter | None = None,
    **attrs: Any,
) -> str:
    """Create a queue through the service; returns its name."""
    if name is None:
        name = unique("fq") + ".fifo" if fifo else unique("sq")
    await queues.create(name, QueueAttributes(fifo=fifo, dead_letter=dead_letter, **attrs))
    return name


def fifo_entries(group: str, count: int, start: int = 0, prefix: str = "m") -> list[SendEntry]:
    """`count` FIFO messages of one group with bodies {"group", "n"} and dedup ids."""
    return [
        SendEntry(body={"group": group, "n": n}, group_id=group, dedup_id=f"{prefix}-{group}-{n}")
        for n in range(start, start + count)
    ]


async def api_queue(client: httpx.AsyncClient, *, fifo: bool = False, name: str | None = None, **attrs: Any) -> str:
    """Create a queue through the HTTP API; returns its name."""
    name = name or (unique("fq") + ".fifo" if fifo else unique("sq"))
    response = await client.put(f"/v1/queues/{name}", json={"fifo": fifo, **attrs})
    assert response.status_code == 201, response.text
    return name
