-- name: api_key_insert
-- Store a new key (its hash, never the key). Returns no row when the random key id is taken,
-- and the caller draws another. The SQS secret comes sealed (NULL: none issued).
INSERT INTO api_keys (id, name, secret_hash, scopes, created_at, sqs_secret)
VALUES (%(id)s, %(name)s, %(secret_hash)s, %(scopes)s, coalesce(%(now)s::timestamptz, now()), %(sqs_secret)s)
ON CONFLICT (id) DO NOTHING
RETURNING id, name, scopes, created_at, revoked_at, sqs_secret IS NOT NULL AS signs_sqs;

-- name: api_key_get
-- The hot lookup behind a cache miss of the auth middleware: one primary-key probe by the
-- public key id. The hash is compared by the caller, in constant time; the sealed SQS secret
-- is opened by the caller, with the server key the database does not hold.
SELECT id, secret_hash, scopes, revoked_at, sqs_secret
FROM api_keys
WHERE id = %(id)s;

-- name: api_key_list
-- Every key, oldest first, without hashes or secrets (for `pqs keys list`).
SELECT id, name, scopes, created_at, revoked_at, sqs_secret IS NOT NULL AS signs_sqs
FROM api_keys
ORDER BY created_at, id;

-- name: api_key_revoke
-- Revoke a key; revoking it again keeps the first revocation time. No row: no such key.
UPDATE api_keys
SET revoked_at = coalesce(revoked_at, %(now)s::timestamptz, now())
WHERE id = %(id)s
RETURNING id, name, scopes, created_at, revoked_at, sqs_secret IS NOT NULL AS signs_sqs;

-- name: api_key_lock
-- Serialise first-start bootstraps (two `pqs serve` starting at once make one admin key):
-- EXCLUSIVE blocks other writers and lockers of the table until commit, not readers.
LOCK TABLE api_keys IN EXCLUSIVE MODE;

-- name: api_key_any
-- Whether any key exists, revoked ones included (the admin key is made on the first start only).
SELECT EXISTS (SELECT 1 FROM api_keys) AS found;

-- name: api_key_hold
-- The keys a keys operation acts as and on (the calling key; the key it revokes), locked in id
-- order until commit, with whether each is valid. The caller's row is read again here, not
-- taken from a process' cached verdict: a revoked key makes and revokes no key, even where
-- another process still trusts it; and two keys revoking each other at once take their rows
-- in one order, so the second sees itself revoked (neither is left with no key to act).
SELECT id, revoked_at IS NULL AS valid
FROM api_keys
WHERE id = ANY(%(ids)s::text[])
ORDER BY id
FOR UPDATE;
