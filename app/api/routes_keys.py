"""The API key's own operations' handlers (their routes: app/api/operations.py)."""

from __future__ import annotations

from fastapi import Request

from app.access import Access
from app.api.auth import ACCESS
from app.api.schemas import GrantOut, KeyOut


async def key_self(request: Request) -> KeyOut:
    """The calling key: its id and its grants, for a client that offers what the key may do (the
    dashboard). Any valid key may ask; it learns nothing it was not given when it was made."""
    access: Access = request.scope[ACCESS]
    grants = [GrantOut.model_validate(grant.to_json()) for grant in access.grants]
    return KeyOut(key_id=access.key_id or None, grants=grants)
