"""`pqs serve`'s app on a real 127.0.0.1 socket, on an event loop of its own thread, for boto3 (a
synchronous client) and the aws CLI: keys with SQS secrets, boto3 clients signing with them, an
httpx client for the REST API, and snapshots of every queue table."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
import httpx
from botocore.config import Config

from app.access import parse_grant
from app.api.transport import PqsHttpProtocol
from app.db.engine import Database
from app.main import create_app
from app.sealing import ServerKey
from app.service.keys import create_signing_key
from tests.api.helpers import LoopThread, port_of, served
from tests.conftest import settings_for
from tests.reads import every_row

T = TypeVar("T")
REGION = "us-east-1"
ACCOUNT = "000000000000"
SERVER_KEY = "q" * 43  # 32 bytes of URL-safe base64: the tests' server key


@dataclass(frozen=True)
class Credentials:
    key_id: str
    secret: str
    bearer: str


class SqsServer:
    """The app served on its own thread's loop (see the module docstring)."""

    def __init__(self, db_url: str, **overrides: Any) -> None:
        self.settings = settings_for(db_url, sqs_server_key=SERVER_KEY, **overrides)
        self.app = create_app(self.settings)
        self._on = LoopThread()
        self.url = ""

    def __enter__(self) -> SqsServer:
        server = self._on.enter(served(self.app, http=PqsHttpProtocol, lifespan="on", log_level="critical"))
        self.url = f"http://127.0.0.1:{port_of(server)}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._on.close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._on.run(coroutine)

    def key(self, *scopes: str) -> Credentials:
        """A new key with these scopes (`PATTERN:ACTIONS`) and an SQS secret."""
        db: Database = self.app.state.db
        grants = tuple(parse_grant(s) for s in scopes)
        server_key = ServerKey.from_text(SERVER_KEY)
        stored, bearer, secret = self.run(db.run(lambda conn: create_signing_key(conn, "test", grants, server_key)))
        return Credentials(stored.key_id, secret, bearer)

    def client(self, credentials: Credentials, *, secret: str | None = None, **config: Any) -> Any:
        """A boto3 SQS client of this server, signing as `credentials` (or with `secret`)."""
        return boto3.client(
            "sqs",
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id=credentials.key_id,
            aws_secret_access_key=secret if secret is not None else credentials.secret,
            config=Config(retries={"max_attempts": 1, "mode": "standard"}, **config),
        )

    def rest(self, credentials: Credentials) -> httpx.Client:
        """A client of the REST API with the key's bearer token."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {credentials.bearer}"}, timeout=30)

    def snapshot(self) -> list[Any]:
        """Every row of every queue table: equal snapshots mean nothing changed."""
        return self.run(every_row(self.app.state.db))
