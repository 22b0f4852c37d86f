"""An idle connection outlives the clients' own idle limit, so that a client never sends on a
connection the service is closing at that very moment.

httpx keeps an idle connection for 5 s and uvicorn closed them after 5 s: a request sent on a
connection idle for just under 5 s could meet the service's close (seen in the fault tests as a
ReadError with nothing in the service's log). `pqs serve` keeps them PQS_KEEP_ALIVE_SECONDS."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from tests.faults.service import pqs_serve

pytestmark = pytest.mark.xdist_group("faults")

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: pqs\r\n\r\n"


def test_the_default_outlives_httpx_idle_connections() -> None:
    assert Settings().keep_alive_seconds > httpx.Limits().keepalive_expiry  # type: ignore[operator]


def answered_after(port: int, idle: float) -> bool:
    """Whether a second request on one connection, sent `idle` seconds after the first answer, is
    answered (False when the service closed the connection meanwhile)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(HEALTHZ)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(idle)
        try:
            sock.sendall(HEALTHZ)
            return sock.recv(4096).startswith(b"HTTP/1.1 200")
        except (ConnectionResetError, BrokenPipeError):
            return False


def test_pqs_serve_keeps_idle_connections_as_long_as_the_setting_says(tmp_path: Path, db_url: str) -> None:
    with pqs_serve(db_url, tmp_path / "serve.log", PQS_DATA_DIR=str(tmp_path), PQS_KEEP_ALIVE_SECONDS="2") as service:
        assert answered_after(service.port, 1.0)
        assert not answered_after(service.port, 3.0)
