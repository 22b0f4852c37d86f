"""What the dashboard needs of the server (app/api/routes_ui.py, app/api/routes_keys.py): its
files under /ui without a key and with a Content-Security-Policy that allows only this origin,
nothing but those files; and `GET /v1/keys/self`, which any valid key may call to learn its own
grants, and nobody without one. The dashboard itself, in a browser: tests/ui."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI

from app.api.routes_ui import FILES, STATIC
from tests.api.helpers import assert_error, client_for, make_key


async def test_the_page_and_its_files_are_served_without_a_key(app: FastAPI) -> None:
    async with client_for(app) as anonymous:
        page = await anonymous.get("/ui")
        assert page.status_code == 200, page.text
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "form-action 'none'" in policy
        assert page.headers["x-content-type-options"] == "nosniff"
        # Every file the page names is served, with the type a browser runs it as.
        named = re.findall(r'(?:src|href)="/ui/([^"]+)"', page.text)
        assert named, page.text
        for name in named:
            answer = await anonymous.get(f"/ui/{name}")
            assert answer.status_code == 200, name
            assert answer.headers["content-security-policy"] == policy
        script = await anonymous.get("/ui/app.js")
        assert script.headers["content-type"] == "text/javascript; charset=utf-8"


def test_every_static_file_is_served_and_no_page_loads_from_elsewhere() -> None:
    on_disk = {path.name for path in STATIC.iterdir()}
    assert on_disk == set(FILES), "a file the server would not serve (unknown suffix)"
    for name, (content, _) in FILES.items():
        text = content.decode()
        # No outside script, style or font: every address is this origin's.
        assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]", text.replace("http://www.w3.org", "")), name
        assert "innerHTML" not in text, name  # text is set as text: a queue name cannot inject markup
        assert "localStorage" not in text, name  # the key lives in sessionStorage, for this tab only
    assert "<script>" not in FILES["index.html"][0].decode()  # no inline script (the CSP refuses one)


@pytest.mark.parametrize("path", ["/ui/", "/ui/nope.js", "/ui/..%2Fmain.py", "/ui/%2E%2E", "/ui/style.css/x"])
async def test_nothing_else_is_served_under_ui(app: FastAPI, path: str) -> None:
    async with client_for(app) as anonymous:
        assert_error(await anonymous.get(path), 404)


async def test_keys_self_tells_any_valid_key_its_grants(app: FastAPI) -> None:
    reader = await make_key(app, "jobs-*:receive,ack", "mail:send")
    async with client_for(app, {"Authorization": f"Bearer {reader}"}) as http:
        answer = await http.get("/v1/keys/self")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "key_id": reader.split("_")[1],
            "grants": [
                {"queues": "jobs-*", "actions": ["receive", "ack"]},
                {"queues": "mail", "actions": ["send"]},
            ],
        }
        # Still refused what it was not granted.
        assert_error(await http.get("/v1/queues"), 403, "forbidden")


@pytest.mark.parametrize("authorization", [None, "Bearer pqs_000000000000_" + "A" * 43, "Basic abc"])
async def test_keys_self_needs_a_valid_key(app: FastAPI, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    async with client_for(app, headers) as http:
        answer = await http.get("/v1/keys/self")
    assert_error(answer, 401, "unauthorized")
    assert answer.headers["www-authenticate"] == "Bearer"


async def test_keys_self_is_no_queue_route(client: httpx.AsyncClient) -> None:
    # `keys` is no queue's name: the route is not GET /v1/queues/{name} under another prefix (a key
    # id there is only revoked: DELETE).
    assert_error(await client.get("/v1/keys/other"), 405)
    assert_error(await client.get("/v1/keys/self/x"), 404)
