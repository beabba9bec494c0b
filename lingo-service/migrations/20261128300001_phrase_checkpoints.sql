-- Checkpoints of phrase states, so that a late session replays a phrase from a recent known state
-- instead of from its first answer (store/phrase_progress.rs, `update_states`; docs/lingo.md,
-- "Phrase progress").
--
-- A late session recomputes each phrase it touches from its answers in time order. It read the
-- learner's review log from the earliest first answer of those phrases: for a phrase first
-- answered two years ago, every session of those two years (a learner with 50,000 sessions: 70 to
-- 100 ms for a one-answer session; 730 sessions of 1,000 answers: 430 ms, and 20 such sessions at
-- once ran past the 5 s deadline). New sessions are at most 30 days old, so a phrase's state as of
-- a time before that never changes again: a checkpoint keeps it, and a replay starts there.
--
-- A row is the state of (learner_id, phrase_id) after exactly its answers with `studied_at`
-- before `cut` (at least one). Written only for phrases with answers older than 31 days (younger
-- ones replay from their first answer, at most 31 days back), about once a month each: a session
-- that advances such a phrase keeps its state before the session when the phrase's newest
-- checkpoint (`phrase_states.checkpoint_at`) is more than 31 days old. A late session removes the
-- checkpoints it makes wrong (cut after its `studied_at`) and keeps one at 31 days ago.
CREATE TABLE phrase_checkpoints (
    learner_id        text NOT NULL,
    phrase_id         text NOT NULL,
    cut               timestamptz NOT NULL,
    stability         real NOT NULL CHECK (stability > 0),
    difficulty        real NOT NULL CHECK (difficulty BETWEEN 1 AND 10),
    due_at            timestamptz NOT NULL,
    reviews           integer NOT NULL CHECK (reviews >= 1),
    correct           integer NOT NULL CHECK (correct BETWEEN 0 AND reviews),
    lapses            integer NOT NULL CHECK (lapses BETWEEN 0 AND reviews),
    first_reviewed_at timestamptz NOT NULL,
    last_reviewed_at  timestamptz NOT NULL CHECK (last_reviewed_at < cut),
    last_grade        smallint NOT NULL CHECK (last_grade BETWEEN 1 AND 4),
    PRIMARY KEY (learner_id, phrase_id, cut)
);

-- The cut of the phrase's newest checkpoint (null: none). Nullable, no default: adding it
-- rewrites nothing.
ALTER TABLE phrase_states ADD COLUMN checkpoint_at timestamptz;

GRANT SELECT, INSERT, DELETE ON phrase_checkpoints TO lingo_app;

-- A state removed by the owner (the runtime role never removes one) takes its checkpoints along:
-- a state written again later starts a new history, which old checkpoints would contradict.
CREATE FUNCTION phrase_checkpoints_of_deleted_states() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    DELETE FROM phrase_checkpoints c USING old_states o
    WHERE (c.learner_id, c.phrase_id) = (o.learner_id, o.phrase_id);
    RETURN NULL;
END $$;
CREATE TRIGGER phrase_checkpoints_delete AFTER DELETE ON phrase_states
    REFERENCING OLD TABLE AS old_states
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_checkpoints_of_deleted_states();

CREATE FUNCTION phrase_checkpoints_of_truncated_states() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    TRUNCATE phrase_checkpoints;
    RETURN NULL;
END $$;
CREATE TRIGGER phrase_checkpoints_truncate AFTER TRUNCATE ON phrase_states
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_checkpoints_of_truncated_states();
