"""The `pqs` command: `serve`, `migrate`, `keys`, `bench`, `pipeline`, and small ops verbs that talk to the
HTTP API."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import typer

from app.config import Settings
from app.db.embedded import database_url, direct_database_url

if TYPE_CHECKING:
    from app.sealing import ServerKey

app = typer.Typer(help="PQS, the Postgres Queue Service.", no_args_is_help=True, add_completion=False)
queue_app = typer.Typer(help="Manage queues through the HTTP API.", no_args_is_help=True)
app.add_typer(queue_app, name="queue")
keys_app = typer.Typer(help="Manage API keys (directly on the database, like `pqs migrate`).", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

UrlOption = Annotated[str | None, typer.Option("--url", help="Base URL of the service (default: PQS_URL).")]
JsonOption = Annotated[bool, typer.Option("--json", help="JSON for scripts instead of a table.")]


@app.command()
def migrate() -> None:
    """Apply database migrations (Alembic upgrade head)."""
    from app.db.migrate import upgrade

    settings = Settings()
    upgrade(direct_database_url(settings))
    typer.echo("database is at the latest migration")


def first_start_admin_key(url: str, key_file: Path, say: Callable[[str], None] = typer.echo) -> str | None:
    """When the database has no API key at all: make an admin key (every action on every queue),
    store it in `key_file` (mode 0600) and print it (`say` it), once. Returns it; None when keys exist."""
    from app.db.sessions import on_connection
    from app.service.keys import bootstrap_admin_key, write_key_file

    key = asyncio.run(on_connection(url, lambda conn: bootstrap_admin_key(conn, lambda k: write_key_file(key_file, k))))
    if key is not None:
        say(
            "Created the admin API key (every action on every queue). It is shown this once:\n"
            f"  {key}\n"
            f"and stored for you in {key_file} (mode 0600). More keys: `pqs keys create --help`."
        )
    return key


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default: PQS_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: PQS_PORT).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: PQS_WORKERS).")] = None,
) -> None:
    """Set up the database (embedded unless PQS_DATABASE_URL is set), migrate (unless
    PQS_MIGRATE_ON_START=false), and serve."""
    import uvicorn

    from app.api.transport import http_protocol
    from app.db.migrate import is_current, upgrade
    from app.main import create_app, tune_gc
    from app.metrics import MULTIPROC_VARIABLE

    settings = Settings()
    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if workers is not None:
        overrides["workers"] = workers
    settings = settings.model_copy(update=overrides)
    logging_config = json_logging(settings.log_level) if settings.log_format == "json" else None
    say = sayer(logging_config is not None)
    try:
        settings.check_auth()
    except ValueError as exc:
        say(f"error: {exc}", logging.ERROR, err=True)
        raise typer.Exit(2) from None
    where = "PQS_DATABASE_URL" if settings.database_url else f"embedded in {settings.data_dir}"
    url = database_url(settings)
    settings = settings.model_copy(update={"database_url": url})
    # Migrations and the first key go straight to the server: Alembic's DDL and locks, and
    # psycopg's own prepared statements, need a session of their own (not PgBouncer's).
    direct = direct_database_url(settings)
    if settings.migrate_on_start:
        upgrade(direct)
    elif not is_current(direct):
        say(
            "error: the database is not at the latest migration and PQS_MIGRATE_ON_START=false:"
            " run `pqs migrate` first (or set PQS_MIGRATE_ON_START=true)",
            logging.ERROR,
            err=True,
        )
        raise typer.Exit(2)
    base = f"http://{settings.host}:{settings.port}"
    if settings.auth_enabled:
        # A warning in JSON mode: shown once, it must pass a log level that hides the rest.
        first_start_admin_key(direct, settings.admin_key_file, lambda text: say(text, logging.WARNING))
        sqs_server_key_or_exit(settings)
    else:
        say("WARNING: access control is off (PQS_AUTH_ENABLED=false); serving on loopback only.", logging.WARNING)
    say(f"PQS serving on {base}  (database: {where}); the dashboard: {base}/ui")
    if logging_config is None:  # hints for a terminal, not for a log collector
        typer.echo("Try:")
        auth = ""
        if settings.auth_enabled:
            typer.echo(f"  export PQS_KEY=$(cat {settings.admin_key_file})")
            auth = ' -H "Authorization: Bearer $PQS_KEY"'
        json_type = "-H 'content-type: application/json'"
        typer.echo(f"  curl -X PUT {base}/v1/queues/jobs.fifo{auth} {json_type} -d '{{\"fifo\": true}}'")
        typer.echo(
            f"  curl -X POST {base}/v1/queues/jobs.fifo/messages{auth} {json_type} "
            '-d \'{"body": {"task": 1}, "group_id": "g1", "dedup_id": "t1"}\''
        )
    warning = open_files_for(settings.max_connections + settings.pool_max_size + OPEN_FILES_SPARE)
    if warning:
        say(f"WARNING: {warning}", logging.WARNING, err=True)
    # uvicorn re-raises SIGTERM once its graceful shutdown is complete: exit 0 then, not -15.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # The protocol carries the connection limits (pickled to each worker with uvicorn's config);
    # the API has no WebSocket route, so no WebSocket support (app/api/transport.py).
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "http": http_protocol(settings),
        "ws": "none",
        "timeout_keep_alive": settings.keep_alive_seconds,
    }
    if logging_config is not None:
        options["log_config"] = logging_config  # each worker applies it too
    if settings.workers == 1:
        app = create_app(settings)
        tune_gc()
        uvicorn.run(app, **options)
        return
    # Worker processes build their app from the environment; they share this process's database.
    os.environ["PQS_DATABASE_URL"] = url
    os.environ["PQS_HOST"] = settings.host
    # Their metrics (app/metrics.py): each worker writes its values to files of its own in a
    # directory made for this serve alone (prometheus-client's multiprocess mode, which needs one
    # that holds no earlier run's files), which the scrape of any worker adds up; removed after.
    with tempfile.TemporaryDirectory(prefix="pqs-metrics-") as directory:
        os.environ[MULTIPROC_VARIABLE] = directory
        uvicorn.run("app.main:create_app_from_env", factory=True, workers=settings.workers, **options)


def json_logging(level: str) -> dict[str, Any]:
    """JSON mode's logging configuration (app/api/access_log.py), applied at once so that what
    `pqs serve` says before uvicorn starts (migrations, the first key) is JSON too."""
    import logging.config

    from app.api.access_log import log_config

    config = log_config(level)
    logging.config.dictConfig(config)
    return config


def sayer(json_logs: bool) -> Callable[..., None]:
    """How `pqs serve` says what it does: `say(text, level, err)` prints a line (to stderr when
    `err`), or in JSON mode logs a record of `level` (logger `app.cli`), a JSON line like every other."""
    if not json_logs:
        return lambda text, level=logging.INFO, err=False: typer.echo(text, err=err)
    log = logging.getLogger("app.cli")
    return lambda text, level=logging.INFO, err=False: log.log(level, text)


# Descriptors a serving process holds besides its client connections and its pool: the listening
# socket, the LISTEN connection, the event loop's, logs, the embedded server's pipes.
OPEN_FILES_SPARE = 64


def open_files_for(needed: int) -> str | None:
    """Raise this process's soft limit of open files (inherited by uvicorn's workers) to `needed`,
    as far as the hard limit allows: a systemd service starts with a soft limit of 1,024, below
    the default PQS_MAX_CONNECTIONS. What to tell the operator when it cannot be done; else None."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        return (
            f"the open-files limit ({hard}) is below what PQS_MAX_CONNECTIONS needs ({needed}): raise it"
            " (ulimit -n, LimitNOFILE=) or lower PQS_MAX_CONNECTIONS"
        )
    return None


def client_api_key(settings: Settings) -> str | None:
    """The key the ops verbs send: PQS_API_KEY, else the admin key file in the data dir if readable."""
    if settings.api_key is not None:
        return settings.api_key.get_secret_value()
    from app.service.keys import read_key_file

    return read_key_file(settings.admin_key_file)


def _client(url: str | None) -> httpx.Client:
    settings = Settings()
    key = client_api_key(settings)
    headers = {"Authorization": f"Bearer {key}"} if key else None
    return httpx.Client(base_url=url or settings.url, headers=headers, timeout=httpx.Timeout(60.0))


def _call(method: str, url: str | None, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
    with _client(url) as client:
        response = client.request(method, path, json=body, params=params)
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


def _queue_names(url: str | None, prefix: str) -> list[str]:
    """Every queue's name (all pages), in name order."""
    names: list[str] = []
    after = ""
    for _ in range(100_000):
        page = _call("GET", url, "/v1/queues", params={"prefix": prefix, "after": after, "limit": 1000})
        names += [queue["name"] for queue in page["queues"]]
        after = page["next_after"]
        if not after:
            break
    return names


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    # Piped (to less, grep, a file): wide rows rather than names folded at 80 columns.
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


@queue_app.command("list")
def queue_list(url: UrlOption = None, prefix: str = "") -> None:
    """List queues (every page)."""
    for name in _queue_names(url, prefix):
        typer.echo(name)


@queue_app.command("stats")
def queue_stats(
    name: Annotated[str | None, typer.Argument(help="One queue (default: every queue).")] = None,
    url: UrlOption = None,
    prefix: Annotated[str, typer.Option(help="Only queues whose names start with this.")] = "",
    as_json: JsonOption = False,
) -> None:
    """Message counts of every queue (or one) as a table: visible, in flight, delayed, the oldest
    message's age and the dead-letter queue; --json gives each queue's attributes and counts."""
    queues = [_call("GET", url, f"/v1/queues/{n}") for n in ([name] if name else _queue_names(url, prefix))]
    if as_json:
        _print(queues[0] if name else queues)
        return
    rows = [
        [
            q["name"],
            "fifo" if q["fifo"] else "standard",
            f"{q['stats']['visible']:,}",
            f"{q['stats']['in_flight']:,}",
            f"{q['stats']['delayed']:,}",
            _age(q["stats"]["oldest_age_seconds"]),
            q["dead_letter"]["queue"] if q["dead_letter"] else "-",
        ]
        for q in queues
    ]
    _table("queues", ["queue", "kind", "visible", "in flight", "delayed", "oldest", "dead letters to"], rows)


@queue_app.command("peek")
def queue_peek(
    name: str,
    url: UrlOption = None,
    limit: Annotated[int, typer.Option(min=1, max=100, help="Messages to show at most.")] = 10,
    as_json: JsonOption = False,
) -> None:
    """Look at a queue's next messages without receiving them (a dead-letter queue before a
    redrive, say): nothing changes."""
    messages = _call("GET", url, f"/v1/queues/{name}/messages", params={"limit": limit})["messages"]
    if as_json:
        _print(messages)
        return

    def short(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return text if len(text) <= 60 else text[:59] + "…"

    rows = [
        [
            str(m["sequence_number"]),
            m["state"],
            str(m["receive_count"]),
            m["group_id"] or "-",
            m["sent_at"][:19],
            m["source_queue"] or "-",
            short(m["last_error"]) if m["last_error"] is not None else "-",
            short(m["body"]),
        ]
        for m in messages
    ]
    columns = ["seq", "state", "receives", "group", "sent", "came from", "last error", "body"]
    _table(f"{name}: the next {len(rows)} message(s), not received", columns, rows)


@queue_app.command("redrive")
def queue_redrive(name: str, url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Move a dead-letter queue's messages back to the queues they came from (needs send there)."""
    moved = _call("POST", url, f"/v1/queues/{name}/redrive")
    if as_json:
        _print(moved)
    else:
        typer.echo(f"moved {moved['count']:,} message(s) from {name} back to their queues")


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


def sqs_server_key_or_exit(settings: Settings) -> ServerKey:
    """The server key SQS secrets are sealed under, made on first use (`pqs serve`, `pqs keys
    create`); exit 2 with the reason when it cannot be used."""
    from app.sealing import ServerKeyError
    from app.service.keys import server_key_for

    try:
        return server_key_for(settings)
    except (ServerKeyError, OSError) as exc:
        typer.echo(f"error: the SQS server key: {exc}", err=True)
        raise typer.Exit(2) from None


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Argument(help="A label for the key (who or what uses it).")],
    scope: Annotated[
        list[str],
        typer.Option(
            "--scope",
            help="PATTERN:ACTIONS, repeatable: a queue-name glob and some of send,receive,ack,read,admin (or *),"
            " e.g. 'jobs-*:send' or '*:*'.",
        ),
    ],
) -> None:
    """Create a key and print it (on stdout, alone), and its SQS credentials (on stderr: access key
    id = the key id, and the secret access key). Both are shown this once: only the key's hash and
    the secret, sealed, are stored."""
    from app.access import InvalidScope, parse_grant
    from app.db.sessions import on_connection
    from app.service.keys import create_signing_key

    try:
        grants = tuple(parse_grant(text) for text in scope)
    except InvalidScope as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    settings = Settings()
    server_key = sqs_server_key_or_exit(settings)
    stored, key, secret = asyncio.run(
        on_connection(direct_database_url(settings), lambda conn: create_signing_key(conn, name, grants, server_key))
    )
    typer.echo(f"created key {stored.key_id} ({name}): {' '.join(map(str, grants))}", err=True)
    typer.echo(f"SQS access key id: {stored.key_id}", err=True)
    typer.echo(f"SQS secret access key: {secret}", err=True)
    typer.echo(key)


@keys_app.command("list")
def keys_list(as_json: JsonOption = False) -> None:
    """List keys: id, status, created, sqs (it can sign SQS requests) or no-sqs (made before SQS
    secrets existed: make a new key to use SQS), name, scopes. Keys are not stored."""
    from app.db.sessions import on_connection
    from app.service.keys import list_keys

    keys = asyncio.run(on_connection(direct_database_url(Settings()), list_keys))
    if as_json:
        _print(
            [
                {
                    "key_id": key.key_id,
                    "name": key.name,
                    "scopes": [str(grant) for grant in key.grants],
                    "created_at": key.created_at.isoformat(),
                    "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
                    "signs_sqs": key.signs_sqs,
                }
                for key in keys
            ]
        )
        return
    for key in keys:
        status = f"revoked {key.revoked_at:%Y-%m-%dT%H:%M:%S%z}" if key.revoked_at else "active"
        scopes = " ".join(map(str, key.grants))
        sqs = "sqs" if key.signs_sqs else "no-sqs"
        # A name with a tab, CR or escape sequence (made before POST /v1/keys refused them, or by
        # `keys create`) would forge or hide a line: written escaped instead.
        name = key.name if key.name.isprintable() else ascii(key.name)
        typer.echo(f"{key.key_id}\t{status}\t{key.created_at:%Y-%m-%dT%H:%M:%S%z}\t{sqs}\t{name}\t{scopes}")


@keys_app.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key id (`pqs keys list`).")]) -> None:
    """Revoke a key; services refuse it within PQS_AUTH_CACHE_SECONDS."""
    from app.db.sessions import on_connection
    from app.errors import KeyNotFound
    from app.service.keys import revoke_key

    try:
        revoked = asyncio.run(on_connection(direct_database_url(Settings()), lambda conn: revoke_key(conn, key_id)))
    except KeyNotFound as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"revoked key {revoked.key_id} ({revoked.name})")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def bench(ctx: typer.Context) -> None:
    """Benchmark the service over HTTP against the database's own commit rate (`pqs bench --help`)."""
    from app.bench.cli import main as bench_main

    bench_main(list(ctx.args))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def pipeline(ctx: typer.Context) -> None:
    """Spark jobs on the history and the queues: archive, report, backfill (`pqs pipeline --help`)."""
    from app.pipeline.cli import main as pipeline_main

    pipeline_main(list(ctx.args))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
