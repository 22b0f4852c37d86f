"""Named SQL blocks, loaded once from `queries/*.sql`, and the variants composed from them.

A block starts with `-- name: <noun>_<verb>` followed by comment lines that say what it does
and why; the statement runs to the next `-- name:` line. Parameters are psycopg named
placeholders (`%(name)s`); `%(now)s` is the injected clock (NULL means the database's now()).

Every block is a statement on its own (tests/db/test_statements.py has the server parse each).
Where statements differ in one part only (a send's insert and a backfill's differ in where the
entries come from and what they answer), the part is a slot, `/* slot: <name> */ ... /* end
slot */`, around text that makes the block whole: a default, or a shape with the columns the
slot must give. A header line `-- variant: <name> (<slot> = <block>, ...)` declares a variant of
the block: a statement of its own name whose slots hold the other blocks' text (`-` for nothing).
A block that fills a slot may need what surrounds the slot to be a statement on its own (the
CTEs it reads): that goes in `/* context */ ... /* end context */`, left out where it fills.
Variants are composed here, once, at import; none is put together at call time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from psycopg import sql

QUERY_DIR = Path(__file__).with_name("queries")
_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$")
_VARIANT = re.compile(r"^-- variant: ([a-z_]+) \((.+)\)\s*$")
_FILL = re.compile(r"^([a-z_]+) = ([a-z_]+|-)$")
_SLOT = re.compile(r"/\* slot: ([a-z_]+) \*/.*?/\* end slot \*/", re.DOTALL)
_CONTEXT = re.compile(r"/\* context \*/.*?/\* end context \*/\s*", re.DOTALL)


@dataclass(frozen=True)
class Query:
    """One named SQL block, or a variant composed of blocks (`base` and its `fills`)."""

    name: str
    description: str
    text: str
    base: str | None = None
    fills: dict[str, str] = field(default_factory=dict)

    @property
    def sql(self) -> sql.SQL:
        """The statement, typed for psycopg (it is a trusted literal from our own files)."""
        return sql.SQL(self.text)


def parse(source: str) -> tuple[dict[str, Query], dict[str, tuple[str, dict[str, str]]]]:
    """Split one .sql file into its named blocks, and the variants their headers declare
    (variant name -> (block, slot -> filling block, '' for none))."""
    blocks: dict[str, Query] = {}
    variants: dict[str, tuple[str, dict[str, str]]] = {}
    name: str | None = None
    lines: list[str] = []

    def close() -> None:
        if name is None:
            return
        comment = [ln[2:].strip() for ln in lines if ln.startswith("--") and not _VARIANT.match(ln)]
        body = "\n".join(ln for ln in lines if not ln.startswith("--")).strip().rstrip(";")
        if not body:
            raise ValueError(f"SQL block {name!r} is empty")
        if name in blocks:
            raise ValueError(f"SQL block {name!r} is defined twice")
        blocks[name] = Query(name, " ".join(comment), body)
        for line in lines:
            variant = _VARIANT.match(line)
            if variant:
                variants[variant[1]] = (name, _fills(variant[1], variant[2]))

    for line in source.splitlines():
        match = _NAME.match(line)
        if match:
            close()
            name, lines = match.group(1), []
        elif name is not None:
            lines.append(line)
    close()
    return blocks, variants


def _fills(variant: str, text: str) -> dict[str, str]:
    fills: dict[str, str] = {}
    for part in text.split(","):
        fill = _FILL.match(part.strip())
        if fill is None:
            raise ValueError(f"variant {variant!r}: {part.strip()!r} is not `slot = block` or `slot = -`")
        fills[fill[1]] = "" if fill[2] == "-" else fill[2]
    return fills


def slots(text: str) -> list[str]:
    """The names of the slots of a block's text, in order."""
    return [match[1] for match in _SLOT.finditer(text)]


def compose(base: Query, fills: dict[str, Query | None]) -> str:
    """`base`'s text with each slot named in `fills` holding that query's text (its context left
    out), or nothing for None."""
    unknown = set(fills) - set(slots(base.text))
    if unknown:
        raise ValueError(f"block {base.name!r} has no slot {sorted(unknown)}")

    def fill(match: re.Match[str]) -> str:
        if match[1] not in fills:
            return match[0]
        query = fills[match[1]]
        return "" if query is None else f"/* {match[1]}: {query.name} */\n{_CONTEXT.sub('', query.text)}\n"

    return _SLOT.sub(fill, base.text)


def load(directory: Path = QUERY_DIR) -> dict[str, Query]:
    """Every block of every .sql file in `directory`, and every variant, by name."""
    queries: dict[str, Query] = {}
    declared: dict[str, tuple[str, dict[str, str]]] = {}
    for path in sorted(directory.glob("*.sql")):
        blocks, variants = parse(path.read_text())
        for name, query in blocks.items():
            if name in queries:
                raise ValueError(f"SQL block {name!r} is defined twice")
            queries[name] = query
        declared.update(variants)

    def resolve(name: str, seen: tuple[str, ...] = ()) -> Query:
        if name in queries:
            return queries[name]
        if name in seen or name not in declared:
            raise ValueError(f"no SQL block or variant {name!r}" if name not in declared else f"{name!r} fills itself")
        base, fills = declared[name]
        parts = {slot: resolve(block, (*seen, name)) if block else None for slot, block in fills.items()}
        described = ", ".join(f"{slot} = {block or '-'}" for slot, block in fills.items())
        queries[name] = Query(name, f"{base} with {described}", compose(queries[base], parts), base, fills)
        return queries[name]

    for name in declared:
        if name in queries and queries[name].base is None:
            raise ValueError(f"variant {name!r} has the name of a block")
        resolve(name)
    return queries


QUERIES = load()
