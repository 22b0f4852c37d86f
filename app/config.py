"""Settings, read from the environment with the `PQS_` prefix (pydantic-settings).

This is the only module-level configuration; everything else receives a `Settings` instance.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, IPvAnyNetwork, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Runtime settings of the service and the `pqs` command."""

    model_config = SettingsConfigDict(env_prefix="PQS_", extra="ignore")

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL; when unset an embedded PostgreSQL is started in `data_dir`.",
    )
    database_direct_url: str | None = Field(
        default=None,
        description="PostgreSQL URL that reaches the server itself, not through a pooler: for LISTEN, the"
        " maintenance leader's lock, migrations and the CLI; unset: PQS_DATABASE_URL.",
    )
    database_pooler: Literal["none", "pgbouncer"] = Field(
        default="none",
        description="What PQS_DATABASE_URL goes through: `pgbouncer` (pool_mode=transaction) runs the pool's"
        " statements unprepared and its session settings per transaction; `none`: the server itself.",
    )
    data_dir: Path = Field(default=Path(".pqs"), description="Directory of the embedded database.")
    host: str = Field(default="127.0.0.1", description="Address `pqs serve` binds to.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port `pqs serve` listens on.")
    migrate_on_start: bool = Field(
        default=True,
        description="Whether `pqs serve` upgrades the schema before serving; the image sets it false,"
        " so that migrating is a deliberate step (`pqs migrate`) and not every replica's start.",
    )
    url: str = Field(default="http://127.0.0.1:8000", description="Base URL the `pqs` ops verbs talk to.")
    pool_min_size: int = Field(default=2, ge=1, description="Connections kept open in the pool.")
    pool_max_size: int = Field(default=16, ge=1, description="Upper bound of the connection pool.")
    pool_timeout_seconds: float = Field(
        default=10.0, gt=0, description="How long a request waits for a pooled connection."
    )
    lock_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="Longest wait of a statement for a lock (lock_timeout); then 503, nothing committed.",
    )
    max_request_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        description="Largest request body accepted; larger bodies get 413 before they are parsed.",
    )
    fast_path: bool = Field(
        default=True,
        description="Serve the message POST routes from the hot lane under pqs serve, without FastAPI's"
        " per-request machinery (same answers, less CPU); false: FastAPI serves them.",
    )
    dedup_window_seconds: int = Field(
        default=300, ge=1, description="How long a deduplication id is remembered (SQS: 5 minutes)."
    )
    maintenance_interval_seconds: float = Field(
        default=5.0, gt=0, description="Pause between two rounds of the maintenance loop."
    )
    maintenance_enabled: bool = Field(
        default=True, description="Run the maintenance loop (retention, dedup pruning) in this process."
    )
    queue_cache_seconds: float = Field(
        default=1.0,
        ge=0,
        description="How long receive/ack paths reuse a queue's attributes before reading them again.",
    )
    auth_enabled: bool = Field(
        default=True,
        description="Require an API key on /v1; off is refused unless the service binds to loopback.",
    )
    auth_cache_seconds: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description="How long a process trusts a verified key; a revocation takes effect within this time.",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="Key the `pqs` ops verbs send; unset: the admin key file in `data_dir`, if readable.",
    )
    header_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="Longest time from a connection's opening (on a kept-alive connection, from a request's first"
        " byte) to the end of the request's headers; then 408 and the connection is closed.",
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Longest time for a request body to arrive once its headers have (not counting while the"
        " service itself does not read); then 408 and the connection is closed.",
    )
    keep_alive_seconds: int = Field(
        default=75,
        gt=0,
        description="How long an idle HTTP connection is kept open between two requests; longer than"
        " clients keep theirs (httpx: 5 s), so that a client never reuses one the service is closing.",
    )
    max_header_bytes: int = Field(
        default=32 * 1024,
        ge=4096,
        description="Largest request line and headers; a larger head is answered 431 as soon as it passes"
        " this, and the connection closed.",
    )
    max_connections: int = Field(
        default=1000,
        ge=1,
        description="Open HTTP connections a serving process (each worker) admits; a request on a connection"
        " opened beyond them is answered 503 with Retry-After and the connection closed.",
    )
    sqs_server_key: SecretStr | None = Field(
        default=None,
        description="Key sealing the SQS secret access keys (32 bytes, URL-safe base64); unset: the file"
        " sqs-server.key in `data_dir`, made (0600) on first start. Back it up apart from the database.",
    )
    sqs_region: str = Field(default="us-east-1", description="Region of the SQS endpoint (signatures, ARNs).")
    sqs_account_id: str = Field(
        default="000000000000", pattern=r"^[0-9]{12}$", description="Account id in SQS queue URLs and ARNs."
    )
    sqs_base_url: str | None = Field(
        default=None,
        description="Base of SQS queue URLs (behind a proxy); unset: the request's scheme and Host.",
    )
    metrics_networks: Annotated[tuple[IPvAnyNetwork, ...], NoDecode] = Field(
        default=(ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")),
        description="Client networks GET /metrics answers without a key (comma-separated; `0.0.0.0/0,::/0`:"
        " everyone; empty: no one); from elsewhere it needs a key with read on every queue (`*`), else 403.",
    )
    metrics_interval_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How often the maintenance leader counts every queue's messages for /metrics (a read of"
        " each queue's rows), and each process samples its connection pool.",
    )
    log_level: str = Field(default="info", description="uvicorn log level.")
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`json`: `pqs serve` logs one JSON object a line (every logger; access lines with the"
        " request id, operation, queue, status and duration); `text`: uvicorn's lines.",
    )
    workers: int = Field(default=1, ge=1, le=64, description="uvicorn worker processes of `pqs serve`.")

    @field_validator("database_url", "database_direct_url", "api_key", "sqs_server_key", "sqs_base_url")
    @classmethod
    def _blank_is_unset(cls, value: str | SecretStr | None) -> str | SecretStr | None:
        if isinstance(value, SecretStr):
            return value if value.get_secret_value() else None
        return value or None

    @field_validator("metrics_networks", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @property
    def admin_key_file(self) -> Path:
        """Where the first start stores the admin key for the operator (mode 0600)."""
        return self.data_dir / "admin.key"

    def check_auth(self) -> None:
        """Refuse to serve without access control anywhere but on loopback (ValueError)."""
        if not self.auth_enabled and not is_loopback(self.host):
            raise ValueError(
                f"PQS_AUTH_ENABLED=false is refused when binding to {self.host!r}:"
                " without access control the service may listen on 127.0.0.1, ::1 or localhost only"
            )


def is_loopback(host: str) -> bool:
    """Whether `host` names the loopback interface only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
