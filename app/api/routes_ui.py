"""The dashboard's files (`GET /ui`, `GET /ui/{file}`; their routes: app/api/operations.py).

The dashboard is static: plain HTML, ES modules and CSS shipped in the package (app/ui/static),
no build step. Outside /v1, so fetching it needs no key; every piece of data it shows it reads
from the API itself, with the key in the Authorization header (docs/dashboard.md). Only the
files found in that directory at start-up are served, by their bare names: no path reaches the
file system. The answers carry a Content-Security-Policy that allows nothing but this origin (no
inline script, no outside script, font or style), and no form may submit anywhere: the sign-in
form is read by the page's script, so a key never ends up in a URL, even if the script fails.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import Response

from app.errors import NotFound, quote

STATIC = Path(__file__).resolve().parent.parent / "ui" / "static"
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# Read once: a few kilobytes that change only with the package.
FILES: dict[str, tuple[bytes, str]] = {
    path.name: (path.read_bytes(), MEDIA_TYPES[path.suffix])
    for path in sorted(STATIC.iterdir())
    if path.suffix in MEDIA_TYPES
}
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    )
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidated on each load: a new release's page never runs an old release's script.
    "Cache-Control": "no-cache",
}


def _answer(name: str) -> Response:
    found = FILES.get(name)
    if found is None:
        raise NotFound(f"the dashboard has no file {quote(name)}")
    content, media_type = found
    return Response(content=content, media_type=media_type, headers=HEADERS)


async def ui_page() -> Response:
    """The dashboard's page."""
    return _answer("index.html")


async def ui_file(file: str) -> Response:
    """One of the dashboard's files (its scripts and style)."""
    return _answer(file)
