-- The `Idempotency-Key` records are written by shared-auth's `idempotency` module, which both
-- services use against a table of one shape: the request hash and the response as bytes (so a
-- replay is byte for byte the first answer) and an explicit expiry.
ALTER TABLE idempotency_keys
    ALTER COLUMN request_hash TYPE bytea USING decode(request_hash, 'hex'),
    ALTER COLUMN body TYPE bytea USING convert_to(body::text, 'UTF8'),
    ALTER COLUMN created_at DROP DEFAULT,
    ADD COLUMN expires_at timestamptz;
ALTER TABLE idempotency_keys RENAME COLUMN status TO response_status;
ALTER TABLE idempotency_keys RENAME COLUMN body TO response_body;
UPDATE idempotency_keys SET expires_at = created_at + interval '24 hours';
ALTER TABLE idempotency_keys ALTER COLUMN expires_at SET NOT NULL;
DROP INDEX idempotency_keys_created_idx;
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
