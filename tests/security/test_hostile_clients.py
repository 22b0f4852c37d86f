"""What one client without any key can make a real `pqs serve` hold, and what a careless client
can make it write down, over real sockets.

- A request head (request line and headers) has no size limit of its own: httptools, unlike h11,
  caps nothing, and the head timeout bounds only the time. Measured against `pqs serve`: one
  connection sending a single header line for 9 s had the service hold 118 MB and spend its CPU
  joining the pieces (+218 MB resident); four such connections raised it to 406 MB and a send of
  another client took over 5 s. A head over a size limit should be refused as soon as it passes
  the limit (431, or 414 for the request target), in the house shape, and the connection closed.
- The body of a request outside /v1 (no key needed there) is read whole, up to
  PQS_MAX_REQUEST_BYTES, before any route is matched (the BodyLimit middleware), although no
  route outside /v1 takes a body. Measured: 40 unauthenticated connections each stalling 1 byte
  short of an 8 MiB body to `POST /nothing` held 320 MB for the body timeout (30 s); under
  PQS_MAX_CONNECTIONS (1000) that is 8 GB. Under /v1 the 401 comes before the body is read.
- Pipelined requests queue without limit: uvicorn stops reading while one waits, but parses the
  whole chunk it read (up to 256 KiB, some 6,000 small requests) and reads the next each time a
  response completes. Measured: one connection pipelining `GET /healthz` without reading its
  answers (23 MB of requests in 5 s) had the service grow by 1.3 GB, some 2 KB per request.
- The access log writes the request target with its query string, so a key a client put in the
  query (`?api_key=`, a common habit) is written to the log, although "keys are never logged".
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from app.access import EVERYTHING
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.service import pqs_serve
from tests.faults.test_http_limits import READ_SECONDS, Answer, connection, exchange, read_answer

pytestmark = pytest.mark.xdist_group("faults")

# Far beyond any sensible cap on a request head (nginx: 8 KiB per header line, 32 KiB in all by
# default; Node: 16 KiB; uvicorn's h11: 16 KiB).
HUGE = 1024 * 1024
# Timeouts far longer than READ_SECONDS: a 408 can never be what answers these tests.
SLOW = "60"
# Refusals of an oversized head: too large (413), target too long (414), fields too large (431).
HEAD_REFUSALS = {400, 413, 414, 431}
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: pqs\r\nConnection: close\r\n\r\n"
# A pipelining client that never reads: it sends for this long, at most this much.
PIPELINE_FOR = 5.0
PIPELINE_BYTES = 8 * 1024 * 1024
# What the service may hold for it: the queued requests the protocol must bound, at ~1 KB each,
# would be hundreds of megabytes; its write buffer and a few thousand parsed requests are not.
HELD_MB = 64


def assert_refused_and_closed(answer: Answer, allowed: set[int]) -> None:
    assert answer.status in allowed, answer
    answer.error()  # the house shape
    assert answer.closed, answer


async def refused_exchange(port: int, request: bytes) -> Answer:
    """`exchange` of a request the service refuses before it has all of it. The service answers
    and closes while the client still sends; the client's send can then meet the reset of that
    close, which takes the answer in flight with it (a race of the two TCP stacks, seen once under
    load, not a choice of the service). Such a try is made again, three times at most."""
    for attempt in range(3):
        try:
            return await exchange(port, request)
        except (BrokenPipeError, ConnectionResetError):
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


async def test_an_oversized_request_head_is_refused_as_soon_as_it_passes_the_limit(tmp_path: Path, db_url: str) -> None:
    with pqs_serve(db_url, tmp_path / "serve.log", PQS_DATA_DIR=str(tmp_path), PQS_HEADER_TIMEOUT_SECONDS=SLOW) as s:
        one_header = b"GET /healthz HTTP/1.1\r\nHost: pqs\r\nX-Big: " + b"a" * HUGE + b"\r\n\r\n"
        assert_refused_and_closed(await refused_exchange(s.port, one_header), HEAD_REFUSALS)

        many_headers = b"GET /healthz HTTP/1.1\r\nHost: pqs\r\n" + b"X-Many: aaaaaaaaaaaaaaaa\r\n" * (HUGE // 26)
        assert_refused_and_closed(await refused_exchange(s.port, many_headers + b"\r\n"), HEAD_REFUSALS)

        long_target = b"GET /healthz?" + b"a" * HUGE + b" HTTP/1.1\r\nHost: pqs\r\n\r\n"
        assert_refused_and_closed(await refused_exchange(s.port, long_target), HEAD_REFUSALS)

        # A head that never ends is refused once it is too large, not when the head timeout passes.
        async with connection(s.port) as (reader, writer):
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: pqs\r\nX-Big: " + b"a" * HUGE)
            answer = await asyncio.wait_for(read_answer(reader, then_closed=True), READ_SECONDS)
        assert_refused_and_closed(answer, HEAD_REFUSALS)

        # The service goes on.
        assert (await exchange(s.port, HEALTHZ)).status == 200
        assert s.proc.poll() is None, s.output()


async def test_a_request_outside_v1_is_answered_without_reading_its_body(tmp_path: Path, db_url: str) -> None:
    log = tmp_path / "serve.log"
    with pqs_serve(db_url, log, PQS_DATA_DIR=str(tmp_path), PQS_BODY_TIMEOUT_SECONDS=SLOW) as service:
        for target, status in ((b"/nothing", 404), (b"/healthz", 405), (b"/openapi.json", 405)):
            # A body of the largest size allowed, of which only the first byte ever comes.
            head = b"POST " + target + b" HTTP/1.1\r\nHost: pqs\r\ncontent-type: application/json\r\n"
            request = head + b"content-length: %d\r\n\r\n{" % (8 * 1024 * 1024)
            async with connection(service.port) as (reader, writer):
                writer.write(request)
                try:
                    answer = await asyncio.wait_for(read_answer(reader, then_closed=False), READ_SECONDS)
                except TimeoutError:
                    pytest.fail(f"POST {target.decode()} without a key: no answer until its whole body is read")
            assert answer.status == status, answer
            answer.error()
        assert service.proc.poll() is None, service.output()


async def test_a_key_in_the_query_string_is_not_written_to_the_access_log(tmp_path: Path, db_url: str) -> None:
    _, key = await on_connection(db_url, lambda conn: create_key(conn, "careless", EVERYTHING))
    secret = key.split("_", 2)[2]
    log = tmp_path / "serve.log"
    with pqs_serve(db_url, log, PQS_DATA_DIR=str(tmp_path), PQS_LOG_LEVEL="info") as service:
        targets = [
            b"GET /v1/queues?api_key=" + key.encode(),  # FastAPI's router, no key header: 401
            b"POST /v1/queues/jobs/messages/receive?access_token=" + key.encode(),  # the hot lane: 401
            b"GET /nothing?key=" + key.encode(),  # no route: 404
        ]
        for target in targets:
            answer = await exchange(service.port, target + b" HTTP/1.1\r\nHost: pqs\r\nConnection: close\r\n\r\n")
            assert answer.status in (401, 404), answer
        # Logged (the access log is on: the line is written before the answer), without the key.
        text = log.read_text(errors="replace")
        assert "/v1/queues/jobs/messages/receive" in text, text[-2000:]
    assert secret not in text, [line for line in text.splitlines() if secret in line]


def resident_mb(pid: int) -> int:
    """The resident memory of process `pid`, in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def pipeline_without_reading(port: int, pid: int) -> tuple[int, int]:
    """On one connection, pipeline `GET /healthz` for PIPELINE_FOR seconds (PIPELINE_BYTES at
    most) and read nothing; the bytes sent, and the service's resident MiB while it still holds
    the connection."""
    request = b"GET /healthz HTTP/1.1\r\nHost: pqs\r\n\r\n"
    data = memoryview(request * (PIPELINE_BYTES // len(request)))
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the answers pile up at the service
        sock.connect(("127.0.0.1", port))
        sock.settimeout(0.2)
        sent = 0
        deadline = time.monotonic() + PIPELINE_FOR
        while sent < len(data) and time.monotonic() < deadline:
            try:
                sent += sock.send(data[sent : sent + 65536])
            except TimeoutError:
                continue  # the service is not reading: it holds what it has
            except (ConnectionResetError, BrokenPipeError):
                break  # the service refused the client and closed: it holds nothing more
        return sent, resident_mb(pid)


async def test_pipelined_requests_of_a_client_that_never_reads_are_bounded(tmp_path: Path, db_url: str) -> None:
    log = tmp_path / "serve.log"
    with pqs_serve(db_url, log, PQS_DATA_DIR=str(tmp_path), PQS_HEADER_TIMEOUT_SECONDS=SLOW) as service:
        before = resident_mb(service.proc.pid)
        sent, during = await asyncio.to_thread(pipeline_without_reading, service.port, service.proc.pid)
        assert during - before < HELD_MB, (
            f"{sent:,} bytes of pipelined requests from one client made the service hold {during - before} MiB more"
        )
        assert (await exchange(service.port, HEALTHZ)).status == 200
        assert service.proc.poll() is None, service.output()
