"""The bench keeps access control on: it makes a key of its own in the run's database before it
starts `pqs serve`, and both load-generator transports send it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from app.access import EVERYTHING
from app.bench.client import Api
from app.bench.config import BenchConfig
from app.bench.target import open_target
from app.db.sessions import on_connection
from app.main import create_app
from app.service.keys import create_key
from tests.api.test_auth_cli import serving
from tests.conftest import settings_for


@pytest.mark.parametrize("transport", ["lean", "httpx"])
async def test_both_transports_send_the_key(db_url: str, transport: str) -> None:
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "test admin", EVERYTHING))
    with serving(create_app(settings_for(db_url)), log_level="warning") as url:
        api = Api(url, transport, key)
        anonymous = Api(url, transport)
        try:
            await api.create_queue("bench-q")
            with pytest.raises(RuntimeError, match="401"):
                await anonymous.create_queue("bench-r")
            response = await api.post("/v1/queues/bench-q/messages", b'{"body": 1}')
            assert response.status_code == 201, response.text
        finally:
            await api.close()
            await anonymous.close()


def test_the_service_the_bench_starts_requires_its_key(tmp_path: Path, server_url: str) -> None:
    config = BenchConfig(database_url=server_url, data_dir=tmp_path, output=None)
    with open_target(config, lambda _: None) as target, httpx.Client(base_url=target.base_url) as http:
        assert http.get("/v1/queues").status_code == 401
        headers = {"Authorization": f"Bearer {target.api_key}"}
        assert http.get("/v1/queues", headers=headers).status_code == 200
    assert not (tmp_path / "admin.key").exists()
