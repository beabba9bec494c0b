-- What the service itself writes: study sessions, per-learner totals and idempotency records.

CREATE TABLE study_sessions (
    id               uuid PRIMARY KEY, -- UUIDv7, made by the service
    learner_id       text NOT NULL CHECK (length(learner_id) BETWEEN 1 AND 255),
    language_code    text NOT NULL REFERENCES languages (code),
    duration_seconds integer NOT NULL CHECK (duration_seconds BETWEEN 1 AND 86400),
    phrases_seen     integer NOT NULL CHECK (phrases_seen BETWEEN 0 AND 10000),
    phrases_correct  integer NOT NULL CHECK (phrases_correct BETWEEN 0 AND phrases_seen),
    xp_awarded       integer NOT NULL CHECK (xp_awarded >= 0),
    created_at       timestamptz NOT NULL
);
-- The caller's list, newest first.
CREATE INDEX study_sessions_learner_idx ON study_sessions (learner_id, created_at DESC, id DESC);

-- One row per learner. Its row lock serialises one learner's writes, so every response's
-- `total_xp` and `leveled_up` are exact even under concurrent posts.
CREATE TABLE learners (
    learner_id text PRIMARY KEY,
    total_xp   bigint NOT NULL DEFAULT 0 CHECK (total_xp >= 0),
    sessions   bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL
);

-- Per learner and language totals, updated in the same transaction as each session.
CREATE TABLE learner_language_totals (
    learner_id             text NOT NULL,
    language_code          text NOT NULL REFERENCES languages (code),
    sessions               bigint NOT NULL,
    total_duration_seconds bigint NOT NULL,
    phrases_seen           bigint NOT NULL,
    phrases_correct        bigint NOT NULL,
    xp                     bigint NOT NULL,
    first_studied_at       timestamptz NOT NULL,
    last_studied_at        timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    PRIMARY KEY (learner_id, language_code)
);
-- Keyset order of the analytics export.
CREATE INDEX learner_language_totals_export_idx
    ON learner_language_totals (updated_at, learner_id, language_code);

-- `Idempotency-Key` records, scoped to the caller and kept 24 h. Only completed requests are
-- stored: a request in flight is detected with a transaction-scoped advisory lock, so a
-- crashed attempt leaves nothing behind that could block a retry.
CREATE TABLE idempotency_keys (
    learner_id      text NOT NULL,
    key             text NOT NULL,
    request_hash    bytea NOT NULL,
    response_status smallint NOT NULL,
    response_body   bytea NOT NULL,
    location        text,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (learner_id, key)
);
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);

GRANT SELECT, INSERT ON study_sessions TO lingo_app;
GRANT SELECT, INSERT, UPDATE ON learners, learner_language_totals TO lingo_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency_keys TO lingo_app;
