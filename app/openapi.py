"""Print the OpenAPI document of the app (`python -m app.openapi > openapi/openapi.json`)."""

from __future__ import annotations

import json
from typing import Any

from app.config import Settings
from app.main import create_app


def document() -> dict[str, Any]:
    """The OpenAPI document; needs no database (the lifespan does not run)."""
    app = create_app(Settings(database_url="postgresql://unused/unused"))
    return app.openapi()


def render() -> str:
    """The document as committed: sorted keys, two-space indent, trailing newline."""
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(render(), end="")
