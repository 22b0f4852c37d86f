"""The `pqs` command: `serve`, `migrate`, `bench`, and small ops verbs that talk to the HTTP API."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

import httpx
import typer

from app.config import Settings

app = typer.Typer(help="PQS, the Postgres Queue Service.", no_args_is_help=True, add_completion=False)
queue_app = typer.Typer(help="Manage queues through the HTTP API.", no_args_is_help=True)
app.add_typer(queue_app, name="queue")

UrlOption = Annotated[str | None, typer.Option("--url", help="Base URL of the service (default: PQS_URL).")]


def database_url(settings: Settings) -> str:
    """PQS_DATABASE_URL, or the embedded server's URL (started on demand)."""
    if settings.database_url:
        return settings.database_url
    from app.db.embedded import embedded_url

    return embedded_url(settings.data_dir)


@app.command()
def migrate() -> None:
    """Apply database migrations (Alembic upgrade head)."""
    from app.db.migrate import upgrade

    settings = Settings()
    upgrade(database_url(settings))
    typer.echo("database is at the latest migration")


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default: PQS_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: PQS_PORT).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: PQS_WORKERS).")] = None,
) -> None:
    """Set up the database (embedded unless PQS_DATABASE_URL is set), migrate, and serve."""
    import uvicorn

    from app.db.migrate import upgrade
    from app.main import create_app

    settings = Settings()
    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if workers is not None:
        overrides["workers"] = workers
    where = "PQS_DATABASE_URL" if settings.database_url else f"embedded in {settings.data_dir}"
    url = database_url(settings)
    settings = settings.model_copy(update={**overrides, "database_url": url})
    upgrade(url)
    base = f"http://{settings.host}:{settings.port}"
    typer.echo(f"PQS serving on {base}  (database: {where})")
    typer.echo("Try:")
    typer.echo(f"  curl -X PUT {base}/v1/queues/jobs.fifo -H 'content-type: application/json' -d '{{\"fifo\": true}}'")
    typer.echo(
        f"  curl -X POST {base}/v1/queues/jobs.fifo/messages -H 'content-type: application/json' "
        '-d \'{"body": {"task": 1}, "group_id": "g1", "dedup_id": "t1"}\''
    )
    if settings.workers == 1:
        uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=settings.log_level)
        return
    # Worker processes build their app from the environment; they share this process's database.
    os.environ["PQS_DATABASE_URL"] = url
    uvicorn.run(
        "app.main:create_app_from_env",
        factory=True,
        workers=settings.workers,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
    )


def _client(url: str | None) -> httpx.Client:
    return httpx.Client(base_url=url or Settings().url, timeout=httpx.Timeout(60.0))


def _call(method: str, url: str | None, path: str, body: Any = None) -> Any:
    with _client(url) as client:
        response = client.request(method, path, json=body)
    if response.status_code >= 400:
        try:
            error = response.json()["error"]
            typer.echo(f"error {response.status_code} {error['code']}: {error['message']}", err=True)
        except (ValueError, KeyError, TypeError):
            typer.echo(f"error {response.status_code}: {response.text}", err=True)
        raise typer.Exit(1)
    return response.json() if response.content else None


def _print(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


@queue_app.command("create")
def queue_create(
    name: str,
    url: UrlOption = None,
    visibility_timeout: Annotated[int | None, typer.Option(help="Seconds a received message stays hidden.")] = None,
    delay_seconds: Annotated[int | None, typer.Option(help="Delay of every new message.")] = None,
    content_based_deduplication: Annotated[
        bool, typer.Option("--content-dedup", help="Deduplicate by body hash.")
    ] = False,
    dead_letter: Annotated[str | None, typer.Option(help="Dead-letter queue name.")] = None,
    max_receive_count: Annotated[int, typer.Option(help="Receives before dead-lettering.")] = 5,
) -> None:
    """Create a queue (FIFO when the name ends in .fifo)."""
    body: dict[str, Any] = {"fifo": name.endswith(".fifo")}
    if visibility_timeout is not None:
        body["visibility_timeout"] = visibility_timeout
    if delay_seconds is not None:
        body["delay_seconds"] = delay_seconds
    if content_based_deduplication:
        body["content_based_deduplication"] = True
    if dead_letter:
        body["dead_letter"] = {"queue": dead_letter, "max_receive_count": max_receive_count}
    _print(_call("PUT", url, f"/v1/queues/{name}", body))


@queue_app.command("list")
def queue_list(url: UrlOption = None, prefix: str = "") -> None:
    """List queues (every page)."""
    after = ""
    for _ in range(100_000):
        page = _call("GET", url, f"/v1/queues?prefix={prefix}&after={after}&limit=1000")
        for queue in page["queues"]:
            typer.echo(queue["name"])
        after = page["next_after"]
        if not after:
            break


@queue_app.command("stats")
def queue_stats(name: str, url: UrlOption = None) -> None:
    """Show a queue's attributes and message counts."""
    _print(_call("GET", url, f"/v1/queues/{name}"))


@queue_app.command("purge")
def queue_purge(name: str, url: UrlOption = None) -> None:
    """Remove every message of a queue."""
    _print(_call("POST", url, f"/v1/queues/{name}/purge"))


@app.command()
def send(
    queue: str,
    body: Annotated[str, typer.Argument(help="Message body as JSON (plain text is sent as a string).")],
    url: UrlOption = None,
    group: Annotated[str | None, typer.Option(help="Message group (FIFO).")] = None,
    dedup: Annotated[str | None, typer.Option(help="Deduplication id.")] = None,
) -> None:
    """Send one message."""
    try:
        value = json.loads(body)
    except ValueError:
        value = body
    _print(_call("POST", url, f"/v1/queues/{queue}/messages", {"body": value, "group_id": group, "dedup_id": dedup}))


@app.command()
def receive(
    queue: str,
    url: UrlOption = None,
    max_messages: Annotated[int, typer.Option("--max", help="Most messages to receive.")] = 1,
    wait: Annotated[int, typer.Option(help="Long-poll seconds.")] = 0,
    ack: Annotated[bool, typer.Option(help="Ack what was received.")] = False,
) -> None:
    """Receive messages (and optionally ack them)."""
    got = _call(
        "POST",
        url,
        f"/v1/queues/{queue}/messages/receive",
        {"max_messages": max_messages, "wait_seconds": wait},
    )
    _print(got)
    if ack and got["messages"]:
        entries = [{"id": str(i), "receipt_handle": m["receipt_handle"]} for i, m in enumerate(got["messages"])]
        _print(_call("POST", url, f"/v1/queues/{queue}/messages/ack", {"entries": entries}))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def bench(ctx: typer.Context) -> None:
    """Benchmark the service over HTTP against the database's own commit rate (`pqs bench --help`)."""
    from app.bench.cli import main as bench_main

    bench_main(list(ctx.args))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
