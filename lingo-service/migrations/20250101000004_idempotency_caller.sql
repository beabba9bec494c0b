-- The `Idempotency-Key` records are written by shared-auth's `idempotency` module, which both
-- services use against a table of one shape; it names the key's owner `caller_id`.
ALTER TABLE idempotency_keys RENAME COLUMN learner_id TO caller_id;
