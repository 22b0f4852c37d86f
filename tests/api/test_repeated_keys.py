"""A REST body whose JSON gives a key twice in one object, at any depth, is refused with 400 and
the house body, through the hot lane and FastAPI alike, before anything is written: json.loads
keeps the last one, so `{"dry_run": true, "dry_run": false}` used to redrive (app/api/json_body.py).
Each case is a request that succeeds with the key given once, so the refusal is the repeat's."""

from __future__ import annotations

from string import Template

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.api.json_body import JsonBodyRoute
from app.api.operations import ROUTERS
from tests.api.helpers import assert_error, counts, receive, send, stats
from tests.factories import api_queue

GRANTS = '"grants": [{"queues": "jobs-*", "actions": ["read"]}]'
# (method, path, body with the repeat, body without it), where `$dlq` is a standard queue holding
# one dead letter, `$q` its source, `$new` a queue not made yet.
CASES = {
    "send": ("POST", "/v1/queues/$q/messages", '{"body": 1, "body": 2}', '{"body": 1}'),
    "send, in the message body": (
        "POST", "/v1/queues/$q/messages", '{"body": {"job": {"a": 1, "a": 2}}}', '{"body": {"job": {"a": 1}}}',
    ),
    "send, in an attribute": (
        "POST", "/v1/queues/$q/messages", '{"body": 1, "attributes": {"k": "v", "k": "w"}}',
        '{"body": 1, "attributes": {"k": "v"}}',
    ),
    "batch, in an entry": (
        "POST", "/v1/queues/$q/messages/batch",
        '{"entries": [{"id": "1", "body": 1}, {"id": "2", "id": "3", "body": 2}]}',
        '{"entries": [{"id": "1", "body": 1}, {"id": "3", "body": 2}]}',
    ),
    "batch": (
        "POST", "/v1/queues/$q/messages/batch", '{"entries": [], "entries": [{"id": "1", "body": 1}]}',
        '{"entries": [{"id": "1", "body": 1}]}',
    ),
    "redrive dry run": ("POST", "/v1/queues/$dlq/redrive", '{"dry_run": true, "dry_run": false}', '{"dry_run": true}'),
    "queue create": ("PUT", "/v1/queues/$new", '{"fifo": false, "fifo": false}', '{"fifo": false}'),
    "queue create, nested": (
        "PUT", "/v1/queues/$new", '{"dead_letter": {"queue": "$dlq", "max_receive_count": 2, "queue": "$dlq"}}',
        '{"dead_letter": {"queue": "$dlq", "max_receive_count": 2}}',
    ),
    "queue patch": ("PATCH", "/v1/queues/$q", '{"delay_seconds": 0, "delay_seconds": 5}', '{"delay_seconds": 0}'),
    "key create": ("POST", "/v1/keys", '{"name": "a", "name": "b", ' + GRANTS + "}", '{"name": "a", ' + GRANTS + "}"),
    "key create, in a grant": (
        "POST", "/v1/keys", '{"name": "a", "grants": [{"queues": "a*", "queues": "*", "actions": ["read"]}]}',
        '{"name": "a", ' + GRANTS + "}",
    ),
}  # fmt: skip


def snapshot(db_url: str) -> dict[str, str]:
    """Every table's rows, digested: what a request wrote shows here."""
    with psycopg.connect(db_url) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            ).fetchall()
        ]
        # Table names come from the catalog, never from input.
        digest = "SELECT count(*), md5(string_agg(t::text, ',' ORDER BY t::text)) FROM \"{}\" t"
        return {table: str(conn.execute(digest.format(table)).fetchone()) for table in tables}


async def a_dead_letter(client: httpx.AsyncClient) -> tuple[str, str]:
    """(source queue, its dead-letter queue holding one message)."""
    dlq = await api_queue(client)
    source = await api_queue(client, dead_letter={"queue": dlq, "max_receive_count": 1})
    await send(client, source, {"job": "poison"})
    await receive(client, source, visibility_timeout=0)
    assert await receive(client, source) == []  # over max_receive_count: moved
    assert counts(await stats(client, dlq)) == (1, 0, 0)
    return source, dlq


@pytest.mark.parametrize("case", list(CASES))
async def test_a_key_given_twice_is_400_and_writes_nothing(
    case: str, app: FastAPI, client: httpx.AsyncClient, db_url: str
) -> None:
    method, path, repeated, once = CASES[case]
    source, dlq = await a_dead_letter(client)
    names = {"q": source, "dlq": dlq, "new": source + "-new"}
    url, repeated, once = (Template(text).substitute(names) for text in (path, repeated, once))
    headers = {"content-type": "application/json"}
    before = snapshot(db_url)

    error = assert_error(await client.request(method, url, content=repeated, headers=headers), 400, "invalid_request")
    assert error["message"].startswith("request body: the key '") and "is given twice in one object" in error["message"]
    assert snapshot(db_url) == before
    # The same request with the key once is served: the repeat alone was refused.
    served = await client.request(method, url, content=once, headers=headers)
    assert served.status_code < 300, served.text
    if case == "redrive dry run":
        assert served.json() == {"count": 1}
        assert counts(await stats(client, dlq)) == (1, 0, 0)


def test_every_route_reads_its_body_with_parse_body() -> None:
    routes = [route for router in ROUTERS for route in router.routes if isinstance(route, APIRoute)]
    assert routes and all(isinstance(route, JsonBodyRoute) for route in routes), [
        route.path for route in routes if not isinstance(route, JsonBodyRoute)
    ]


@pytest.mark.parametrize(
    ("method", "path", "template"),
    [
        ("POST", "/v1/queues/$q/messages", '{"body": {"n": $n}}'),  # the hot lane's, when it runs
        ("PATCH", "/v1/queues/$q", '{"delay_seconds": $n}'),  # FastAPI's
    ],
)
async def test_a_number_too_long_to_convert_is_named_and_writes_nothing(
    method: str, path: str, template: str, client: httpx.AsyncClient, db_url: str
) -> None:
    # Python turns at most 4,300 digits into an int: json.loads refused a longer one with a
    # ValueError of its own, and the client was told its body was not JSON at all.
    source, _ = await a_dead_letter(client)
    url = Template(path).substitute(q=source)
    before = snapshot(db_url)
    body = Template(template).substitute(n="7" * 5_000)
    response = await client.request(method, url, content=body, headers={"content-type": "application/json"})
    error = assert_error(response, 400, "invalid_request")
    assert error["message"] == "request body: a number has 5,000 digits, more than 4,300", error
    assert snapshot(db_url) == before
