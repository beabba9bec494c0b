-- Phrase progress (API.md section 3.1): every answer of a study session in a review log, and a
-- memory state per (learner, phrase) derived from its answers with FSRS-6.

-- When the session happened (offline apps send it later); `created_at` stays the arrival time.
ALTER TABLE study_sessions
    ADD COLUMN studied_at   timestamptz,
    ADD COLUMN answer_count integer NOT NULL DEFAULT 0 CHECK (answer_count BETWEEN 0 AND 1000);
UPDATE study_sessions SET studied_at = created_at;
ALTER TABLE study_sessions ALTER COLUMN studied_at SET NOT NULL;

-- Distinct phrases answered per learner and language (`phrases_started` of GET /me/progress).
ALTER TABLE learner_language_totals ADD COLUMN phrases_started bigint NOT NULL DEFAULT 0;

-- The answers themselves, in the order the learner gave them. A phrase's state is the fold of
-- its rows in (studied_at, session_id, position) order, so a late session is replayed into place.
-- No foreign key to `phrases`: the pipeline owns the catalogue and may remove a phrase; its
-- answers stay on record.
CREATE TABLE phrase_reviews (
    learner_id text NOT NULL,
    phrase_id  text NOT NULL,
    studied_at timestamptz NOT NULL,
    session_id uuid NOT NULL REFERENCES study_sessions (id),
    position   integer NOT NULL CHECK (position BETWEEN 0 AND 999),
    -- FSRS rating: 1 again, 2 hard, 3 good, 4 easy (only `again` is a wrong answer).
    grade      smallint NOT NULL CHECK (grade BETWEEN 1 AND 4),
    PRIMARY KEY (learner_id, phrase_id, studied_at, session_id, position)
);

-- One row per (learner, phrase) answered at least once.
CREATE TABLE phrase_states (
    learner_id        text NOT NULL,
    phrase_id         text NOT NULL,
    language_code     text NOT NULL,
    -- f32 as the `fsrs` crate computes them, so an incremental update starts from the exact state.
    stability         real NOT NULL CHECK (stability > 0),
    difficulty        real NOT NULL CHECK (difficulty BETWEEN 1 AND 10),
    due_at            timestamptz NOT NULL,
    reviews           integer NOT NULL CHECK (reviews >= 1),
    correct           integer NOT NULL CHECK (correct BETWEEN 0 AND reviews),
    lapses            integer NOT NULL CHECK (lapses BETWEEN 0 AND reviews),
    first_reviewed_at timestamptz NOT NULL,
    last_reviewed_at  timestamptz NOT NULL,
    last_grade        smallint NOT NULL CHECK (last_grade BETWEEN 1 AND 4),
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (learner_id, phrase_id)
);
-- "Due first" reads of one learner (GET /me/phrases, GET /me/reviews), over all languages or one.
CREATE INDEX phrase_states_due_idx ON phrase_states (learner_id, due_at, phrase_id);
CREATE INDEX phrase_states_language_due_idx
    ON phrase_states (learner_id, language_code, due_at, phrase_id);
-- Keyset order of the analytics export.
CREATE INDEX phrase_states_export_idx ON phrase_states (updated_at, learner_id, phrase_id);

GRANT SELECT, INSERT ON phrase_reviews TO lingo_app;
GRANT SELECT, INSERT, UPDATE ON phrase_states TO lingo_app;
