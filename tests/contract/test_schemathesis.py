"""schemathesis against the committed `openapi/openapi.json`, driving the app in-process (ASGI).

Every documented operation gets generated requests, valid and invalid ones; every answer must have
a documented status code, a body and headers that conform to the document, the documented content
type, and never a 5xx.

Random names would make nearly every case a 404, so generation is steered towards real code:
- most cases name a queue staged here (among them `jobs.fifo`, the document's own example, which
  the deterministic phases use), and `stage` gives that queue what the operation needs (it exists,
  holds a message, has dead letters to redrive);
- placeholders stand for values only known at call time and are replaced just before it: a real
  receipt handle (taken by a receive), a fresh queue name for PUT, a dead-letter queue of the
  right kind;
- messages often get valid attributes and a placeholder group id: on a FIFO queue it becomes a
  real one (and a per-message delay, refused there, goes); on a standard queue it goes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from pytest import FixtureRequest, fixture
from schemathesis import Case, HookContext, Response
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import create_app
from tests.conftest import admin_key, settings_for
from tests.security.harness import Threaded

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
CONFIG = schemathesis.Config.from_dict(
    {
        "base-url": "http://testserver",
        # Bounded and reproducible: the same cases on every run, nothing written to disk.
        "generation": {"max-examples": 60, "deterministic": True, "database": "none"},
    }
)
schema = schemathesis.openapi.from_path(DOCUMENT, config=CONFIG)

# Staged for every case that names one of them, dead-letter queues first. With max_receive_count
# 1, a message received twice moves to the dead-letter queue, so redrive has something to move.
QUEUES: dict[str, dict[str, Any]] = {
    "q1-dlq": {},
    "q1": {"dead_letter": {"queue": "q1-dlq", "max_receive_count": 1}},
    "q1.fifo": {"fifo": True},
    "jobs-dlq.fifo": {"fifo": True},
    "jobs.fifo": {"fifo": True, "dead_letter": {"queue": "jobs-dlq.fifo", "max_receive_count": 1}},
}
SOURCE_OF = {"q1-dlq": "q1", "jobs-dlq.fifo": "jobs.fifo"}
DEAD_LETTER_OF_KIND = {False: "q1-dlq", True: "jobs-dlq.fifo"}

# Placeholders, replaced by `stage`. The receipt handle the document gives as its example stands
# for a real one too.
REAL_HANDLE = "real-receipt-handle"
EXAMPLE_HANDLE = "AQAAAAAAAAQAGx3U0m1vRdGmY4c1aB2c3d"
NEW_QUEUE = "new-queue"
STAGED_DLQ = "staged-dlq"
FITTING = "fitting:"
_fresh = itertools.count()

ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,256}")
# Group and dedup ids: a few that repeat (duplicates, shared groups) and any valid one.
TOKENS = st.one_of(st.sampled_from(["a", "b", "c"]), st.from_regex(r"\A[A-Za-z0-9!#$%&*+.:=?@^_|~-]{1,16}\Z"))


@dataclass(frozen=True)
class Api:
    """The app under test (in-process, or served at `url`) and the headers every request carries."""

    app: FastAPI | None
    url: str | None
    headers: dict[str, str]
    staged: set[str] = field(default_factory=set)  # staged queues known to exist

    def call(self, case: Case) -> Response:
        """Send the case: over the socket of the served app, else in-process (schemathesis then
        runs the app's lifespan, ended at teardown)."""
        if self.url is not None:
            return case.call(base_url=self.url, headers=self.headers)
        return case.call(app=self.app, headers=self.headers)

    def request(self, method: str, path: str, name: str, body: Any = None) -> Response:
        """One call of a documented operation with explicit data (not generated)."""
        return self.call(schema[path][method].Case(path_parameters={"name": name}, body=body))


@fixture
def auth_headers(db_url: str) -> dict[str, str]:
    """Headers every request of this module carries, the one place for credentials: an admin key
    made in the test's database."""
    return {"Authorization": f"Bearer {admin_key(db_url)}"}


@fixture(params=["lane", "fastapi"])
def api(request: FixtureRequest, db_url: str, auth_headers: dict[str, str]) -> Iterator[Api]:
    """The app on this test's database: served as `pqs serve` serves it, the hot lane answering
    the hot operations over a real socket; or in-process through FastAPI alone (the two must
    answer alike)."""
    if request.param == "fastapi":
        yield Api(create_app(settings_for(db_url, fast_path=False)), None, auth_headers)
        return
    with Threaded(db_url, "lane") as threaded:
        yield Api(None, f"http://127.0.0.1:{threaded.server.port}", auth_headers)


# -- steering generation ----------------------------------------------------------------------


def _steer_path(parameters: dict[str, Any], name: str, real_handle: bool) -> dict[str, Any]:
    steered = {**parameters, "name": name}
    if real_handle and "receipt_handle" in steered:
        steered["receipt_handle"] = REAL_HANDLE
    return steered


@schema.hook
def flatmap_path_parameters(context: HookContext, path_parameters: Any) -> st.SearchStrategy[Any]:
    """Most cases name a staged queue (or a fresh one); half of those carry a real receipt handle."""
    if not isinstance(path_parameters, dict) or "name" not in path_parameters:
        return st.just(path_parameters)
    names = st.sampled_from([*QUEUES, NEW_QUEUE])
    steered = st.builds(_steer_path, st.just(path_parameters), names, st.booleans())
    return st.one_of(st.just(path_parameters), steered, steered, steered)


def _fitting(message: dict[str, Any], group: str, dedup: str) -> dict[str, Any]:
    """The message with valid attributes and a placeholder group id that `stage` fits to the queue."""
    attributes = message.get("attributes")
    if isinstance(attributes, dict):
        valid = [(k, v) for k, v in attributes.items() if ATTRIBUTE_NAME.fullmatch(k) and isinstance(v, str)]
        message = {**message, "attributes": dict(valid[:10])}
    return {**message, "group_id": FITTING + group, "dedup_id": dedup}


def _steer_message(message: Any) -> st.SearchStrategy[Any]:
    if not isinstance(message, dict) or "body" not in message:
        return st.just(message)
    return st.one_of(st.just(message), st.builds(_fitting, st.just(message), TOKENS, TOKENS))


def _steer_entry(entry: Any) -> st.SearchStrategy[Any]:
    if isinstance(entry, dict) and "receipt_handle" in entry:
        return st.sampled_from([entry, {**entry, "receipt_handle": REAL_HANDLE}])
    return _steer_message(entry)


@schema.hook
def flatmap_body(context: HookContext, body: Any) -> st.SearchStrategy[Any]:
    """Messages often suit one kind of queue, settle entries often carry real receipt handles,
    and dead-letter settings often name a staged dead-letter queue."""
    if isinstance(body, dict) and isinstance(body.get("entries"), list):
        entries = st.tuples(*(_steer_entry(entry) for entry in body["entries"]))
        return entries.map(lambda steered: {**body, "entries": list(steered)})
    if isinstance(body, dict) and isinstance(body.get("dead_letter"), dict):
        staged = {**body, "dead_letter": {**body["dead_letter"], "queue": STAGED_DLQ}}
        return st.sampled_from([body, staged])
    return _steer_message(body)


# -- staging -------------------------------------------------------------------------------------


def _handle_slots(case: Case) -> list[dict[str, Any]]:
    """The containers whose `receipt_handle` stands for a real one."""
    slots = []
    if case.path_parameters and case.path_parameters.get("receipt_handle") in (REAL_HANDLE, EXAMPLE_HANDLE):
        slots.append(case.path_parameters)
    entries = case.body.get("entries") if isinstance(case.body, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("receipt_handle") in (REAL_HANDLE, EXAMPLE_HANDLE):
            slots.append(entry)
    return slots


def _messages(case: Case) -> list[dict[str, Any]]:
    """The messages of a send or batch send case."""
    if not isinstance(case.body, dict):
        return []
    entries = case.body.get("entries")
    candidates = entries if isinstance(entries, list) else [case.body]
    return [m for m in candidates if isinstance(m, dict) and "body" in m]


def _send(api: Api, name: str, count: int = 1) -> None:
    entries: list[dict[str, Any]] = []
    for _ in range(count):
        n = next(_fresh)
        entry: dict[str, Any] = {"id": f"e{n}", "body": {"staged": n}}
        if name.endswith(".fifo"):
            # A group of its own: no earlier message in flight holds it back.
            entry |= {"group_id": f"staged-{n}", "dedup_id": f"staged-{n}"}
        entries.append(entry)
    api.request("POST", "/v1/queues/{name}/messages/batch", name, {"entries": entries})


def _receive(api: Api, name: str, count: int, visibility_timeout: int = 30) -> list[str]:
    body = {"max_messages": count, "wait_seconds": 0, "visibility_timeout": visibility_timeout}
    response = api.request("POST", "/v1/queues/{name}/messages/receive", name, body)
    assert response.status_code == 200, response.text
    return [message["receipt_handle"] for message in response.json()["messages"]]


def _ensure(api: Api, queue: str) -> None:
    if queue not in api.staged:
        api.request("PUT", "/v1/queues/{name}", queue, QUEUES[queue])
        api.staged.add(queue)


def _fill_placeholders(api: Api, case: Case, name: str) -> None:
    """A fresh name for PUT, a dead-letter queue of the right kind, group ids that fit the queue."""
    body = case.body if isinstance(case.body, dict) else {}
    fifo = body.get("fifo") is True if case.method == "PUT" else name.endswith(".fifo")
    if name == NEW_QUEUE and case.method == "PUT":
        case.path_parameters["name"] = f"new-{next(_fresh)}" + (".fifo" if fifo else "")
    dead_letter = body.get("dead_letter")
    if isinstance(dead_letter, dict) and dead_letter.get("queue") == STAGED_DLQ:
        dead_letter["queue"] = DEAD_LETTER_OF_KIND[fifo]
        _ensure(api, dead_letter["queue"])
    for message in _messages(case):
        group = message.get("group_id")
        if isinstance(group, str) and group.startswith(FITTING):
            if fifo:
                message["group_id"] = group.removeprefix(FITTING)
                message.pop("delay_seconds", None)
            else:
                del message["group_id"]


def stage(api: Api, case: Case) -> None:
    """Replace the placeholders and give the case's queue (if staged) what the operation needs."""
    # Long polls are tested elsewhere; here a receive on an empty queue would only make the run slow.
    if isinstance(case.body, dict) and isinstance(case.body.get("wait_seconds"), int):
        case.body["wait_seconds"] = 0
    slots = _handle_slots(case)
    for slot in slots:
        slot["receipt_handle"] = REAL_HANDLE  # well formed, held by nothing: a 404 unless replaced below
    name = (case.path_parameters or {}).get("name")
    if not isinstance(name, str):
        return
    _fill_placeholders(api, case, name)
    if name not in QUEUES:
        return
    redrive = case.operation.path.endswith("/redrive") and name in SOURCE_OF
    # Dead-letter queues first: a source queue names its own when it is created.
    for queue in QUEUES:
        if queue in (name, QUEUES[name].get("dead_letter", {}).get("queue"), redrive and SOURCE_OF[name]):
            _ensure(api, queue)
    if case.method == "DELETE" and case.operation.path == "/v1/queues/{name}":
        api.staged.discard(name)  # this case may delete it
    if redrive:
        # Received twice with max_receive_count 1: the second receive dead-letters it.
        _send(api, SOURCE_OF[name])
        _receive(api, SOURCE_OF[name], 1, visibility_timeout=0)
        _receive(api, SOURCE_OF[name], 1)
    # At most 10 distinct handles; a longer batch repeats them (a case of its own).
    _send(api, name, max(1, min(len(slots), 10)))
    handles = _receive(api, name, min(len(slots), 10)) if slots else []
    for index, slot in enumerate(slots):
        if handles:
            slot["receipt_handle"] = handles[index % len(handles)]


# -- the test -------------------------------------------------------------------------------------


@schema.parametrize()
# The app (and its database) serves all the cases of one operation on purpose: `stage` gives each
# case what it relies on.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api_conforms_to_its_document(case: Case, api: Api) -> None:
    stage(api, case)
    response = api.call(case)
    case.validate_response(response, checks=CHECKS, headers=api.headers)
