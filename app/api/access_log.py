"""The access log names a request's path without its query string.

A careless client may put its API key in the query (`?api_key=...`); the key must reach no log.
uvicorn's access logger (which the hot lane writes to as well) formats each line from the record's
arguments (client, method, path with query, HTTP version, status); this filter drops the query
from the third before any handler formats it.
"""

from __future__ import annotations

import logging

ACCESS_LOGGER = "uvicorn.access"


class WithoutQuery(logging.Filter):
    """Drops the query string from an access log record's path."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (args[0], args[1], args[2].split("?", 1)[0], args[3], args[4])
        return True


_FILTER = WithoutQuery()


def install() -> None:
    """Put the filter on uvicorn's access logger (once, however many apps are made)."""
    logging.getLogger(ACCESS_LOGGER).addFilter(_FILTER)
