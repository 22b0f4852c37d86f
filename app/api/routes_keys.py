"""The API keys' operations' handlers: the calling key, and (for a key that administers every
queue, `admin` on `*`) list, create, revoke. Their routes: app/api/operations.py; the rules of
create and revoke: app/service/keys.py (KeyAdmin), which `pqs keys` shares."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from app.access import Access, InvalidScope, grant
from app.api.auth import ACCESS
from app.api.schemas import ApiKeyCreated, ApiKeyList, ApiKeyOut, GrantOut, KeyCreateRequest, KeyOut
from app.errors import InvalidInput
from app.service.keys import KeyAdmin


async def _key_admin(request: Request) -> KeyAdmin:
    service: KeyAdmin = request.app.state.key_admin
    return service


KeyAdminDep = Annotated[KeyAdmin, Depends(_key_admin)]
KeyId = Annotated[str, Path(min_length=1, max_length=40, description="The key's id.", examples=["3f9a0c21b7d4"])]


async def key_self(request: Request) -> KeyOut:
    """The calling key: its id and its grants, for a client that offers what the key may do (the
    dashboard). Any valid key may ask; it learns nothing it was not given when it was made."""
    access: Access = request.scope[ACCESS]
    grants = [GrantOut.model_validate(grant.to_json()) for grant in access.grants]
    return KeyOut(key_id=access.key_id or None, grants=grants)


async def list_keys(keys: KeyAdminDep, request: Request) -> ApiKeyList:
    """Every key, revoked ones included, oldest first; never a key or a secret (neither is stored)."""
    return ApiKeyList(keys=[ApiKeyOut.of(key) for key in await keys.keys(request.scope[ACCESS])])


async def create_key(body: KeyCreateRequest, keys: KeyAdminDep, request: Request) -> ApiKeyCreated:
    """A new key with these grants and its SQS secret, both answered this once. 403
    (`grant_beyond_key`) when a grant holds more than the calling key does: a key makes no key
    wider than itself."""
    try:
        grants = tuple(grant(g.queues, g.actions) for g in body.grants)
    except InvalidScope as exc:
        raise InvalidInput(str(exc)) from None
    stored, key, secret = await keys.create(request.scope[ACCESS], body.name, grants)
    return ApiKeyCreated(api_key=ApiKeyOut.of(stored), key=key, sqs_secret_access_key=secret)


async def revoke_key(key_id: KeyId, keys: KeyAdminDep, request: Request) -> ApiKeyOut:
    """Revoke a key (again: no change): refused at once by this process, by the others within
    PQS_AUTH_CACHE_SECONDS. 409 (`key_revokes_itself`) for the calling key."""
    return ApiKeyOut.of(await keys.revoke(request.scope[ACCESS], key_id))
