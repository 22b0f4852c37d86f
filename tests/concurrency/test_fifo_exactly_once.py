"""FIFO queues under parallel consumers (and producers): every message is delivered and acked
exactly once, each group in send order, and no group is ever held by two receives at once."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from typing import Any

import httpx

from app.domain import SendEntry, SendResult
from app.service.messages import MessageService
from app.service.queues import QueueService
from tests.concurrency.history import History
from tests.concurrency.workers import (
    HttpEndpoint,
    LeaseSampler,
    ServiceEndpoint,
    history_in_db,
    messages_left,
    run_consumers,
)
from tests.factories import api_queue, fifo_entries, make_queue


def _sequence_by_group(history: History) -> dict[str | None, list[int]]:
    order: dict[str | None, list[int]] = defaultdict(list)
    for d in history.deliveries:
        order[d.got.group_id].append(d.got.sequence_number)
    return order


async def test_parallel_consumers_over_http_get_each_group_in_order_exactly_once(
    client: httpx.AsyncClient, db_url: str
) -> None:
    groups, per_group, consumers = 40, 25, 10
    name = await api_queue(client, fifo=True)
    # Interleaved: consecutive sequence numbers belong to different groups.
    entries: list[dict[str, Any]] = [
        {"id": f"g{g}-{n}", "body": {"group": f"g{g}", "n": n}, "group_id": f"g{g}", "dedup_id": f"g{g}-{n}"}
        for n in range(per_group)
        for g in range(groups)
    ]
    for start in range(0, len(entries), 250):
        response = await client.post(
            f"/v1/queues/{name}/messages/batch", json={"entries": entries[start : start + 250]}
        )
        assert response.status_code == 200, response.text
        assert response.json()["failed"] == []
    history = History({(f"g{g}", n) for g in range(groups) for n in range(per_group)}, fifo=True)

    async with LeaseSampler(db_url) as sampler:
        await run_consumers(HttpEndpoint(client, name), history, consumers, time_limit=40, max_messages=5)

    assert history.problems() == []
    assert history.group_order() == {f"g{g}": list(range(per_group)) for g in range(groups)}
    assert sampler.violations == []
    assert sampler.samples >= 3, "the sampler never looked while consumers ran"
    assert len({d.consumer for d in history.deliveries}) > 1, "one consumer did all the work"
    assert await history_in_db(db_url) == {"acked": (groups * per_group, groups * per_group, 1)}
    assert await messages_left(db_url) == 0


async def test_concurrent_producers_and_consumers_keep_each_group_in_send_order(
    queues: QueueService, live: MessageService, db_url: str
) -> None:
    producers, groups_each, per_group, consumers = 4, 8, 20, 8
    name = await make_queue(queues, fifo=True)
    groups = {p: [f"p{p}-g{i}" for i in range(groups_each)] for p in range(producers)}
    history = History({(g, n) for gs in groups.values() for g in gs for n in range(per_group)}, fifo=True)
    sent: dict[str | None, list[int]] = defaultdict(list)  # group -> sequence numbers in send order

    async def produce(p: int) -> None:
        rng = random.Random(p)
        next_n = dict.fromkeys(groups[p], 0)
        for _ in range(groups_each * per_group):
            open_groups = [g for g, n in next_n.items() if n < per_group]
            if not open_groups:
                return
            group = rng.choice(open_groups)
            count = min(rng.randint(1, 3), per_group - next_n[group])
            results = await live.send(name, fifo_entries(group, count, start=next_n[group]))
            for result in results:
                assert isinstance(result, SendResult) and not result.duplicate, result
                sent[group].append(result.sequence_number)
            next_n[group] += count
        raise AssertionError(f"producer {p} did not finish: {next_n}")

    async with LeaseSampler(db_url) as sampler, asyncio.TaskGroup() as tasks:
        for p in range(producers):
            tasks.create_task(produce(p))
        tasks.create_task(run_consumers(ServiceEndpoint(live, name), history, consumers, time_limit=40, max_messages=5))

    assert history.problems() == []
    all_groups = [g for gs in groups.values() for g in gs]
    assert history.group_order() == {g: list(range(per_group)) for g in all_groups}
    # Inside a group, sequence numbers follow send order and deliveries follow sequence numbers.
    for group in all_groups:
        assert sent[group] == sorted(sent[group]), group
    assert _sequence_by_group(history) == {g: sent[g] for g in all_groups}
    assert sampler.violations == []
    assert sampler.samples >= 3
    total = producers * groups_each * per_group
    assert await history_in_db(db_url) == {"acked": (total, total, 1)}
    assert await messages_left(db_url) == 0


async def test_producers_sharing_a_group_keep_their_own_order_and_commit_order(
    queues: QueueService, live: MessageService, db_url: str
) -> None:
    producers, each, consumers = 4, 30, 6
    name = await make_queue(queues, fifo=True)
    # Counters are producer * 1000 + i: several producers write to the one group.
    keys = {("shared", p * 1000 + i) for p in range(producers) for i in range(each)}
    history = History(keys, fifo=True, counters_per_group=False)
    committed: list[int] = []  # sequence numbers of the sends, as they returned

    async def produce(p: int) -> None:
        for i in range(each):
            entry = SendEntry(body={"n": p * 1000 + i}, group_id="shared", dedup_id=f"p{p}-{i}")
            [result] = await live.send(name, [entry])
            assert isinstance(result, SendResult) and not result.duplicate, result
            committed.append(result.sequence_number)

    async with LeaseSampler(db_url) as sampler, asyncio.TaskGroup() as tasks:
        for p in range(producers):
            tasks.create_task(produce(p))
        tasks.create_task(run_consumers(ServiceEndpoint(live, name), history, consumers, time_limit=40, max_messages=3))

    assert history.problems() == []
    assert sampler.violations == []
    delivered = [d.got for d in history.deliveries]
    # One group: delivered in sequence-number order, none drawn early but committed (and
    # delivered) after a later one.
    assert [g.sequence_number for g in delivered] == sorted(committed)
    for p in range(producers):
        mine = [g.n for g in delivered if g.n // 1000 == p]
        assert mine == [p * 1000 + i for i in range(each)], f"producer {p} out of order"
    assert await history_in_db(db_url) == {"acked": (len(keys), len(keys), 1)}
