"""Named SQL blocks, loaded once from `queries/*.sql`.

A block starts with `-- name: <noun>_<verb>` followed by comment lines that say what it does
and why; the statement runs to the next `-- name:` line. Parameters are psycopg named
placeholders (`%(name)s`); `%(now)s` is the injected clock (NULL means the database's now()).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from psycopg import sql

QUERY_DIR = Path(__file__).with_name("queries")
_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$")


@dataclass(frozen=True)
class Query:
    """One named SQL block."""

    name: str
    description: str
    text: str

    @property
    def sql(self) -> sql.SQL:
        """The statement, typed for psycopg (it is a trusted literal from our own files)."""
        return sql.SQL(self.text)


def parse(source: str) -> dict[str, Query]:
    """Split one .sql file into its named blocks."""
    blocks: dict[str, Query] = {}
    name: str | None = None
    lines: list[str] = []

    def close() -> None:
        if name is None:
            return
        comment = [ln[2:].strip() for ln in lines if ln.startswith("--")]
        body = "\n".join(ln for ln in lines if not ln.startswith("--")).strip().rstrip(";")
        if not body:
            raise ValueError(f"SQL block {name!r} is empty")
        if name in blocks:
            raise ValueError(f"SQL block {name!r} is defined twice")
        blocks[name] = Query(name, " ".join(comment), body)

    for line in source.splitlines():
        match = _NAME.match(line)
        if match:
            close()
            name, lines = match.group(1), []
        elif name is not None:
            lines.append(line)
    close()
    return blocks


def load(directory: Path = QUERY_DIR) -> dict[str, Query]:
    """Every block of every .sql file in `directory`, by name."""
    queries: dict[str, Query] = {}
    for path in sorted(directory.glob("*.sql")):
        for name, query in parse(path.read_text()).items():
            if name in queries:
                raise ValueError(f"SQL block {name!r} is defined twice")
            queries[name] = query
    return queries


QUERIES = load()
