"""The named SQL blocks load, and every block a repository calls exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.db.sql import QUERIES, parse

ROOT = Path(__file__).resolve().parents[2]


def test_every_block_has_a_description() -> None:
    for query in QUERIES.values():
        assert query.description, f"{query.name} has no description"
        assert query.text.strip()


def test_every_referenced_block_exists() -> None:
    referenced: set[str] = set()
    for path in (ROOT / "app").rglob("*.py"):
        referenced |= set(re.findall(r'QUERIES\["([a-z_]+)"\]', path.read_text()))
        referenced |= set(re.findall(r'\bstatement\(\s*"([a-z_]+)"', path.read_text()))
    missing = referenced - set(QUERIES)
    assert not missing
    assert referenced, "found no references at all"


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse("-- name: a\n-- one\nSELECT 1;\n-- name: a\n-- two\nSELECT 2;\n")


def test_empty_block_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty"):
        parse("-- name: a\n-- nothing here\n")
