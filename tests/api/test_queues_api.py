"""Contract of the queue routes: PUT (idempotent create), GET, list, PATCH, DELETE, purge."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from tests.api.helpers import EMPTY, assert_error, counts, lenient_client, receive, send, stats
from tests.factories import api_queue, unique

DEFAULTS = {
    "fifo": False,
    "visibility_timeout": 30,
    "delay_seconds": 0,
    "retention_seconds": 345_600,
    "max_message_bytes": 1_048_576,
    "receive_wait_seconds": 0,
    "content_based_deduplication": False,
    "deduplication_scope": "queue",
    "dead_letter": None,
    "dead_letter_for": None,
}
# attribute -> (lowest, highest) accepted value
RANGES = {
    "visibility_timeout": (0, 43_200),
    "delay_seconds": (0, 900),
    "retention_seconds": (60, 1_209_600),
    "max_message_bytes": (1_024, 1_048_576),
    "receive_wait_seconds": (0, 20),
}


def attributes_of(queue: dict[str, Any]) -> dict[str, Any]:
    """The settable attributes of a queue as returned by the API."""
    return {key: queue[key] for key in DEFAULTS}


# -- PUT --------------------------------------------------------------------------------------


async def test_put_creates_with_sqs_defaults_then_is_idempotent(client: httpx.AsyncClient) -> None:
    created = await client.put("/v1/queues/jobs")
    assert created.status_code == 201, created.text
    queue = created.json()
    assert queue["name"] == "jobs"
    assert attributes_of(queue) == DEFAULTS
    assert queue["stats"] is None
    assert queue["created_at"] and queue["updated_at"]

    again_without_body = await client.put("/v1/queues/jobs")
    assert again_without_body.status_code == 200, again_without_body.text
    assert attributes_of(again_without_body.json()) == DEFAULTS
    again_with_defaults = await client.put("/v1/queues/jobs", json={})
    assert again_with_defaults.status_code == 200, again_with_defaults.text
    assert again_with_defaults.json()["created_at"] == queue["created_at"]


async def test_put_same_attributes_is_200_and_different_is_409(client: httpx.AsyncClient) -> None:
    attrs = {
        "fifo": True,
        "visibility_timeout": 90,
        "content_based_deduplication": True,
        "deduplication_scope": "group",
    }
    assert (await client.put("/v1/queues/jobs.fifo", json=attrs)).status_code == 201
    same = await client.put("/v1/queues/jobs.fifo", json=attrs)
    assert same.status_code == 200, same.text
    assert same.json()["visibility_timeout"] == 90

    conflict = await client.put("/v1/queues/jobs.fifo", json={**attrs, "visibility_timeout": 91})
    assert_error(conflict, 409, "queue_exists")
    # Omitting attributes means "the defaults", which differ from what the queue has.
    assert_error(await client.put("/v1/queues/jobs.fifo", json={"fifo": True}), 409, "queue_exists")
    assert (await client.get("/v1/queues/jobs.fifo")).json()["visibility_timeout"] == 90


async def test_put_with_dead_letter_is_idempotent(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client)
    attrs = {"dead_letter": {"queue": dlq, "max_receive_count": 3}}
    assert (await client.put("/v1/queues/src", json=attrs)).status_code == 201
    again = await client.put("/v1/queues/src", json=attrs)
    assert again.status_code == 200, again.text
    assert again.json()["dead_letter"] == {"queue": dlq, "max_receive_count": 3}
    other = {"dead_letter": {"queue": dlq, "max_receive_count": 4}}
    assert_error(await client.put("/v1/queues/src", json=other), 409, "queue_exists")


VALID_NAMES = [("a", False), ("A-b_c9", False), ("x" * 75, False), ("jobs.fifo", True), ("x" * 75 + ".fifo", True)]
# URL-encoded where needed: space, é, NUL.
INVALID_NAMES = [
    "x" * 76,
    "x" * 81,
    "a%20b",
    "a.b",
    "jobs.FIFO",
    "caf%C3%A9",
    ".fifo",
    "a%00",
    "a:b",
    "x" * 76 + ".fifo",
]


async def test_put_accepts_valid_names(client: httpx.AsyncClient) -> None:
    for name, fifo in VALID_NAMES:
        response = await client.put(f"/v1/queues/{name}", json={"fifo": fifo})
        assert response.status_code == 201, (name, response.text)
        assert response.json()["name"] == name


async def test_put_refuses_invalid_names(client: httpx.AsyncClient) -> None:
    for name in INVALID_NAMES:
        # A control character (NUL here) makes the path no route at all: 404 before anything reads it.
        status = 404 if "%00" in name else 400
        assert_error(await client.put(f"/v1/queues/{name}", json={"fifo": name.endswith(".fifo")}), status)
    assert (await client.get("/v1/queues")).json()["queues"] == []


async def test_put_fifo_suffix_must_match_fifo_flag(client: httpx.AsyncClient) -> None:
    assert_error(await client.put("/v1/queues/jobs.fifo", json={"fifo": False}), 400, "invalid_queue_name")
    assert_error(await client.put("/v1/queues/jobs.fifo"), 400, "invalid_queue_name")
    assert_error(await client.put("/v1/queues/jobs", json={"fifo": True}), 400, "invalid_queue_name")


async def test_put_attribute_bounds(client: httpx.AsyncClient) -> None:
    for attribute, (low, high) in RANGES.items():
        for value in (low - 1, high + 1):
            response = await client.put(f"/v1/queues/{unique()}", json={attribute: value})
            assert_error(response, 400, "invalid_request")
            assert attribute in response.json()["error"]["message"]
        for value in (low, high):
            response = await client.put(f"/v1/queues/{unique()}", json={attribute: value})
            assert response.status_code == 201, response.text
            assert response.json()[attribute] == value
    assert len((await client.get("/v1/queues")).json()["queues"]) == 2 * len(RANGES)


MALFORMED_ATTRIBUTES: list[Any] = [
    {"colour": "blue"},
    {"deduplication_scope": "message"},
    {"visibility_timeout": 1.5},
    {"visibility_timeout": "soon"},
    {"dead_letter": {"queue": "x"}},
    {"dead_letter": {"queue": "x", "max_receive_count": 3, "extra": 1}},
    [1, 2],
]


async def test_put_refuses_malformed_attributes_with_400(client: httpx.AsyncClient) -> None:
    for body in MALFORMED_ATTRIBUTES:
        assert_error(await client.put("/v1/queues/jobs", json=body), 400, "invalid_request")
    assert_error(await client.get("/v1/queues/jobs"), 404, "queue_not_found")


async def test_put_dead_letter_rules(client: httpx.AsyncClient) -> None:
    standard_dlq = await api_queue(client)
    fifo_dlq = await api_queue(client, fifo=True)

    def dl(queue: str, count: int = 2) -> dict[str, Any]:
        return {"dead_letter": {"queue": queue, "max_receive_count": count}}

    assert_error(await client.put("/v1/queues/a", json=dl("missing")), 400, "invalid_attributes")
    assert_error(await client.put("/v1/queues/a", json=dl(fifo_dlq)), 400, "invalid_attributes")
    assert_error(
        await client.put("/v1/queues/b.fifo", json={"fifo": True, **dl(standard_dlq)}), 400, "invalid_attributes"
    )
    assert_error(await client.put("/v1/queues/a", json=dl("a")), 400, "invalid_attributes")
    assert_error(await client.put("/v1/queues/a", json=dl(standard_dlq, 0)), 400, "invalid_request")
    assert_error(await client.get("/v1/queues/a"), 404, "queue_not_found")

    ok = await client.put("/v1/queues/b.fifo", json={"fifo": True, **dl(fifo_dlq, 1)})
    assert ok.status_code == 201, ok.text
    assert ok.json()["dead_letter"] == {"queue": fifo_dlq, "max_receive_count": 1}


# -- GET and list -----------------------------------------------------------------------------


async def test_get_unknown_queue_is_404_and_invalid_name_400(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v1/queues/nope"), 404, "queue_not_found")
    assert_error(await client.get("/v1/queues/nope.fifo"), 404, "queue_not_found")
    assert_error(await client.get("/v1/queues/a.b"), 400, "invalid_queue_name")


async def test_get_empty_queue_stats(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, visibility_timeout=45)
    response = await client.get(f"/v1/queues/{queue}")
    assert response.status_code == 200
    assert response.json()["visibility_timeout"] == 45
    assert response.json()["stats"] == EMPTY


async def test_get_stats_count_visible_in_flight_and_delayed(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    for n in range(3):
        await send(client, queue, {"n": n})
    assert len(await receive(client, queue)) == 1
    await send(client, queue, {"n": "later"}, delay_seconds=600)

    s = await stats(client, queue)
    assert counts(s) == (2, 1, 1)
    assert isinstance(s["oldest_age_seconds"], float)
    assert 0 <= s["oldest_age_seconds"] < 60


async def test_list_queues_in_name_order_with_pages(client: httpx.AsyncClient) -> None:
    names = ["d", "a", "c", "e", "b"]
    for name in names:
        await api_queue(client, name=name)

    first = (await client.get("/v1/queues", params={"limit": 2})).json()
    assert [q["name"] for q in first["queues"]] == ["a", "b"]
    assert first["next_after"] == "b"
    assert all(q["stats"] is None for q in first["queues"])
    second = (await client.get("/v1/queues", params={"limit": 2, "after": first["next_after"]})).json()
    assert [q["name"] for q in second["queues"]] == ["c", "d"]
    assert second["next_after"] == "d"
    last = (await client.get("/v1/queues", params={"limit": 2, "after": second["next_after"]})).json()
    assert [q["name"] for q in last["queues"]] == ["e"]
    assert last["next_after"] is None

    # A page that ends exactly at the last queue says so.
    exact = (await client.get("/v1/queues", params={"limit": 5})).json()
    assert [q["name"] for q in exact["queues"]] == sorted(names)
    assert exact["next_after"] is None
    everything = (await client.get("/v1/queues")).json()
    assert len(everything["queues"]) == 5 and everything["next_after"] is None


async def test_list_prefix_is_literal(client: httpx.AsyncClient) -> None:
    for name in ["a_1", "a_2", "ab", "aX_", "a-1", "b_1"]:
        await api_queue(client, name=name)
    await api_queue(client, name="a_3.fifo", fifo=True)

    page = (await client.get("/v1/queues", params={"prefix": "a_"})).json()
    assert [q["name"] for q in page["queues"]] == ["a_1", "a_2", "a_3.fifo"]
    assert page["next_after"] is None
    percent = (await client.get("/v1/queues", params={"prefix": "a%"})).json()
    assert percent["queues"] == []
    paged = (await client.get("/v1/queues", params={"prefix": "a_", "limit": 1, "after": "a_1"})).json()
    assert [q["name"] for q in paged["queues"]] == ["a_2"]
    assert paged["next_after"] == "a_2"


async def test_list_refuses_bad_parameters(client: httpx.AsyncClient) -> None:
    bad: list[dict[str, Any]] = [{"limit": 0}, {"limit": 1001}, {"limit": "ten"}, {"prefix": "x" * 81}]
    for params in [*bad, {"after": "x" * 81}]:
        assert_error(await client.get("/v1/queues", params=params), 400, "invalid_request")


# -- PATCH ------------------------------------------------------------------------------------


async def test_patch_changes_only_given_fields(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, visibility_timeout=40, delay_seconds=5)
    before = (await client.get(f"/v1/queues/{queue}")).json()
    response = await client.patch(f"/v1/queues/{queue}", json={"visibility_timeout": 120})
    assert response.status_code == 200, response.text
    after = response.json()
    assert after["visibility_timeout"] == 120
    assert attributes_of(after) == {**attributes_of(before), "visibility_timeout": 120}
    assert after["updated_at"] >= before["updated_at"]
    assert (await client.get(f"/v1/queues/{queue}")).json()["visibility_timeout"] == 120

    nothing = await client.patch(f"/v1/queues/{queue}", json={})
    assert nothing.status_code == 200
    assert attributes_of(nothing.json()) == attributes_of(after)


async def test_patch_every_attribute(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    changes = {
        "fifo": True,
        "visibility_timeout": 0,
        "delay_seconds": 900,
        "retention_seconds": 60,
        "max_message_bytes": 1024,
        "receive_wait_seconds": 20,
        "content_based_deduplication": True,
        "deduplication_scope": "group",
    }
    response = await client.patch(f"/v1/queues/{queue}", json=changes)
    assert response.status_code == 200, response.text
    assert attributes_of(response.json()) == {**changes, "dead_letter": None, "dead_letter_for": None}


async def test_patch_refuses_fifo_change_bad_values_and_unknown_queue(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    assert_error(await client.patch(f"/v1/queues/{queue}", json={"fifo": True}), 400, "invalid_attributes")
    assert_error(await client.patch(f"/v1/queues/{queue}", json={"visibility_timeout": 43_201}), 400)
    assert_error(await client.patch(f"/v1/queues/{queue}", json={"retention_seconds": 59}), 400)
    assert_error(await client.patch(f"/v1/queues/{queue}", json={"name": "other"}), 400, "invalid_request")
    assert attributes_of((await client.get(f"/v1/queues/{queue}")).json()) == DEFAULTS
    response = await client.patch("/v1/queues/nope", json={"visibility_timeout": 1})
    assert_error(response, 404, "queue_not_found")


async def test_patch_null_for_non_numeric_attribute_keeps_it_or_is_400(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, content_based_deduplication=True, deduplication_scope="group")
    for attribute in ("content_based_deduplication", "deduplication_scope"):
        response = await client.patch(f"/v1/queues/{queue}", json={attribute: None})
        if response.status_code != 200:
            assert_error(response, 400)
    after = (await client.get(f"/v1/queues/{queue}")).json()
    assert (after["content_based_deduplication"], after["deduplication_scope"]) == (True, "group")
    # null keeps the current value, fifo included
    response = await client.patch(f"/v1/queues/{queue}", json={"fifo": None})
    assert response.status_code == 200 and response.json()["fifo"] is False


async def test_patch_null_numeric_attribute_is_not_500(app: FastAPI) -> None:
    async with lenient_client(app) as client:
        queue = await api_queue(client, visibility_timeout=40)
        statuses = {}
        for attribute in RANGES:
            response = await client.patch(f"/v1/queues/{queue}", json={attribute: None})
            statuses[attribute] = response.status_code
            if response.status_code == 200:
                assert response.json()["visibility_timeout"] == 40
            else:
                assert_error(response, response.status_code)
    # Either "null keeps the value" (200) or a 400 would do; a 500 would not.
    assert all(status in (200, 400) for status in statuses.values()), statuses


async def test_patch_dead_letter_set_and_remove(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client)
    queue = await api_queue(client, visibility_timeout=40)
    dead_letter = {"queue": dlq, "max_receive_count": 2}
    set_ = await client.patch(f"/v1/queues/{queue}", json={"dead_letter": dead_letter})
    assert set_.status_code == 200, set_.text
    assert set_.json()["dead_letter"] == dead_letter

    other = await client.patch(f"/v1/queues/{queue}", json={"visibility_timeout": 50})
    assert other.json()["dead_letter"] == dead_letter

    removed = await client.patch(f"/v1/queues/{queue}", json={"dead_letter": None})
    assert removed.status_code == 200, removed.text
    assert removed.json()["dead_letter"] is None
    assert removed.json()["visibility_timeout"] == 50
    assert (await client.get(f"/v1/queues/{queue}")).json()["dead_letter"] is None


async def test_patch_dead_letter_rules(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    fifo_dlq = await api_queue(client, fifo=True)
    for target in ("missing", fifo_dlq, queue):
        dead_letter = {"queue": target, "max_receive_count": 1}
        response = await client.patch(f"/v1/queues/{queue}", json={"dead_letter": dead_letter})
        assert_error(response, 400, "invalid_attributes")
    assert (await client.get(f"/v1/queues/{queue}")).json()["dead_letter"] is None


async def test_dead_letter_for_names_the_queues_that_may_use_a_dead_letter_queue(client: httpx.AsyncClient) -> None:
    allowed, other = unique("allowed"), unique("other")
    dlq = await api_queue(client, dead_letter_for=[allowed, allowed, "a-later-queue", "NULL"])
    shown = (await client.get(f"/v1/queues/{dlq}")).json()
    assert shown["dead_letter_for"] == sorted({allowed, "a-later-queue", "NULL"})
    # The same set in another order is the same queue (an idempotent PUT); another set is not.
    again = await client.put(f"/v1/queues/{dlq}", json={"dead_letter_for": ["NULL", "a-later-queue", allowed]})
    assert again.status_code == 200, again.text
    assert_error(await client.put(f"/v1/queues/{dlq}", json={"dead_letter_for": [allowed]}), 409, "queue_exists")

    dead_letter = {"dead_letter": {"queue": dlq, "max_receive_count": 3}}
    assert_error(await client.put(f"/v1/queues/{other}", json=dead_letter), 400, "invalid_attributes")
    assert (await client.get(f"/v1/queues/{other}")).status_code == 404
    created = await client.put(f"/v1/queues/{allowed}", json=dead_letter)
    assert created.status_code == 201, created.text

    plain = await api_queue(client)
    refused = await client.patch(f"/v1/queues/{plain}", json=dead_letter)
    assert_error(refused, 400, "invalid_attributes")
    assert (await client.get(f"/v1/queues/{plain}")).json()["dead_letter"] is None
    # [] allows none; null any queue again.
    none = await client.patch(f"/v1/queues/{dlq}", json={"dead_letter_for": []})
    assert none.status_code == 200 and none.json()["dead_letter_for"] == [], none.text
    assert_error(await client.patch(f"/v1/queues/{plain}", json=dead_letter), 400, "invalid_attributes")
    anyone = await client.patch(f"/v1/queues/{dlq}", json={"dead_letter_for": None})
    assert anyone.status_code == 200 and anyone.json()["dead_letter_for"] is None, anyone.text
    assert (await client.patch(f"/v1/queues/{plain}", json=dead_letter)).status_code == 200
    # A source already linked stays linked when the list changes (as SQS: checked when it is named).
    assert (await client.get(f"/v1/queues/{allowed}")).json()["dead_letter"]["queue"] == dlq

    for bad in ([f"q{i}" for i in range(11)], ["no spaces"], [""], ["a\n"], "jobs", [7]):
        response = await client.patch(f"/v1/queues/{dlq}", json={"dead_letter_for": bad})
        assert response.status_code == 400, (bad, response.text)
    assert (await client.get(f"/v1/queues/{dlq}")).json()["dead_letter_for"] is None


# -- DELETE and purge -------------------------------------------------------------------------


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    await send(client, queue, "x")
    response = await client.delete(f"/v1/queues/{queue}")
    assert response.status_code == 204
    assert response.content == b""
    assert_error(await client.get(f"/v1/queues/{queue}"), 404, "queue_not_found")
    assert_error(await client.delete(f"/v1/queues/{queue}"), 404, "queue_not_found")
    # The name is free again, and the new queue starts empty.
    await api_queue(client, name=queue)
    assert counts(await stats(client, queue)) == (0, 0, 0)


async def test_delete_fifo_queue_with_ready_messages(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    await send(client, queue, 1, group_id="g", dedup_id="d1")
    assert (await client.delete(f"/v1/queues/{queue}")).status_code == 204
    assert_error(await client.get(f"/v1/queues/{queue}"), 404, "queue_not_found")


async def test_delete_fifo_queue_with_messages_in_flight(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client, fifo=True)
    await send(client, queue, 1, group_id="g", dedup_id="d1")
    await send(client, queue, 2, group_id="g", dedup_id="d2")
    assert len(await receive(client, queue)) >= 1
    response = await client.delete(f"/v1/queues/{queue}")
    assert response.status_code == 204, response.text
    assert_error(await client.get(f"/v1/queues/{queue}"), 404, "queue_not_found")


async def test_delete_dead_letter_queue_in_use_is_409(client: httpx.AsyncClient) -> None:
    dlq = await api_queue(client)
    source = await api_queue(client, dead_letter={"queue": dlq, "max_receive_count": 1})
    assert_error(await client.delete(f"/v1/queues/{dlq}"), 409, "queue_in_use")
    assert (await client.get(f"/v1/queues/{dlq}")).status_code == 200

    await client.patch(f"/v1/queues/{source}", json={"dead_letter": None})
    assert (await client.delete(f"/v1/queues/{dlq}")).status_code == 204


async def test_purge_counts_and_empties(client: httpx.AsyncClient) -> None:
    queue = await api_queue(client)
    for n in range(3):
        await send(client, queue, n)
    await send(client, queue, "delayed", delay_seconds=300)
    in_flight = await receive(client, queue)
    assert len(in_flight) == 1

    response = await client.post(f"/v1/queues/{queue}/purge")
    assert response.status_code == 200, response.text
    assert response.json() == {"count": 4}
    assert await stats(client, queue) == EMPTY
    assert await receive(client, queue) == []
    assert (await client.post(f"/v1/queues/{queue}/purge")).json() == {"count": 0}
    assert_error(await client.post("/v1/queues/nope/purge"), 404, "queue_not_found")
