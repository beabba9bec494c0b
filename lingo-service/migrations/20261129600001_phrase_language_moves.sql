-- A phrase whose language the catalogue pipeline corrects (`UPDATE phrases SET language_code =
-- 'pt' WHERE id = ...`) takes its learners' progress with it (docs/lingo.md, "When the catalogue
-- moves a phrase"). A learner's state (`phrase_states`) keeps a copy of its phrase's language:
-- the pages read the states per language by `phrase_states_language_due_idx`, the due counts
-- (`phrase_due_days`) and `phrases_started` (`learner_language_totals`) are per language. Left
-- as they were, a moved phrase stayed listed, due and started under its old language, and an
-- incremental analytics reader never heard of the move.
--
-- A trigger on `phrases` moves them in the pipeline's own statement and transaction, whatever
-- tool writes the catalogue:
-- - the states take the phrase's new language, and `updated_at` the time of the move, so that
--   both exports show them again. The export reads only below its horizon, the
--   start of the oldest transaction in progress that may still stamp a row
--   (store/progress.rs, `export_horizon`), but it cannot see the start of the pipeline's
--   transactions (another role's). So the move shows itself there, as a transaction-level
--   advisory lock (class 1_861_129_600, the second the move's stamp is taken in; all roles read
--   pg_locks), and stamps its rows after taking it, with `clock_timestamp()` rather than the
--   statement's start: a horizon read before the lock was taken is earlier than the stamp;
--   one read after finds it and stays at or below the stamp until the move commits;
-- - the due-day counts follow by the existing update trigger on `phrase_states` (migration
--   20261128100001): it subtracts each old (learner, language, day) and adds each new one, which
--   for a change of language alone moves the count from one language to the other;
-- - `phrases_started` moves from the old language's totals row to the new one's, which is made
--   (no sessions, no XP, no study times: the sessions stay with the language they were studied
--   in, only the states move) when the learner has none; both rows' `updated_at` move, so the
--   progress export shows them again. Nothing else in the totals is counted from the states.
--
-- Concurrency with a learner's session answering a moved phrase:
-- - a session writes its states under the learner's row lock (store/phrase_progress/answers.rs,
--   and the due-day trigger relies on it); the move takes the row locks of the learners it moves
--   states of, in learner order, before it reads their states in a later statement (a new
--   snapshot), so it waits for their sessions in flight and moves what they wrote, and a later
--   session of theirs waits for the move to commit and then sees the phrase's new language;
-- - a session answering a phrase for the first time has no state the move could find: it locks
--   the phrases it is about to insert states of `FOR KEY SHARE` while it checks their language
--   (answers.rs, `lock_new_phrases`, through `lock_phrases_of_language` below: a row lock needs
--   a write privilege the service's role has not on the catalogue). For that lock to conflict
--   with the move, the language is made part of a key (the unique index below): a change of it
--   is then a key update, which waits
--   for such locks (and they for it; after it commits, the session finds the phrase in its new
--   language and answers 422 `unknown_phrase`), while edits of a text or a translation count
--   still never wait for a session. The same kind of lock as the foreign keys to `phrases` take.
-- - A move of one phrase per transaction never deadlocks with sessions (a session waits for the
--   phrase only when the learner has no state of it, and the move waits for the learner only when
--   they have one). A transaction that moves several phrases, in one statement or more, may: a
--   session holding its learner's lock and waiting for one phrase it answers first, while the
--   move, holding that phrase, waits for the learner because of another. PostgreSQL then aborts
--   one of them (deadlock_detected), as with any two writers locking rows in opposite orders.
--
-- Cost: the move finds a phrase's states by a scan of `phrase_states` (one per statement, however
-- many phrases it moves): an index on `phrase_id` would let it read only them, but every state a
-- session writes (never a HOT update: `due_at` is indexed) would pay for that index, for a rare
-- correction. Measured (PostgreSQL 15, 2 shared cores): moving a phrase with 10,000 states (of
-- 10,000 learners, among 210,000 states) took 0.40-0.60 s in the pipeline's statement (five
-- runs): about 0.07 s to find the states and lock their learners, 0.14 s the due-day counts, the
-- rest writing the states and the 20,000 totals rows. A text edit or a translation count costs
-- the trigger a join of the statement's rows and nothing more.
--
-- SECURITY DEFINER (owned by lingo_owner), like the search refresh the pipeline's writes already
-- run: the pipeline role gets no right on the learners' tables.

-- The catalogue's list by language keeps its index, now unique (it always was: `id` is): the
-- language becomes a key column of `phrases`, see above. Built first under another name: the
-- build blocks only the pipeline's writes; the old index is dropped at the end (below).
CREATE UNIQUE INDEX phrases_language_code_id_unique_idx ON phrases (language_code, id);

-- The exports' hold (see above), for a catalogue write about to stamp learners' rows: a
-- transaction-level advisory lock of class 1_861_129_600 keyed by the current second (seconds
-- since 2000, which fit the lock's 32-bit key until 2068); returns the time to stamp with, taken
-- after the lock.
CREATE FUNCTION hold_exports_for_a_catalogue_stamp() RETURNS timestamptz
    LANGUAGE plpgsql SET search_path = lingo, pg_temp AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1861129600,
        (floor(extract(epoch FROM clock_timestamp())) - 946684800)::integer);
    RETURN clock_timestamp();
END $$;
REVOKE EXECUTE ON FUNCTION hold_exports_for_a_catalogue_stamp() FROM PUBLIC;

-- The start of the second of the oldest hold taken by a catalogue write in progress in this
-- database, null when there is none: the exports stay at or below it (store/progress.rs,
-- `export_horizon`). Every role may read `pg_locks`.
CREATE FUNCTION oldest_catalogue_stamp_in_progress() RETURNS timestamptz
    LANGUAGE sql SET search_path = lingo, pg_temp
BEGIN ATOMIC
    SELECT to_timestamp(946684800 + min(objid::bigint)) FROM pg_locks
     WHERE locktype = 'advisory' AND classid = 1861129600 AND objsubid = 2
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database());
END;
REVOKE EXECUTE ON FUNCTION oldest_catalogue_stamp_in_progress() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION oldest_catalogue_stamp_in_progress() TO lingo_app;

-- Brings the states of the phrases `ids` to their phrases' language, with the totals' counts of
-- phrases started. Does nothing for states already there.
CREATE FUNCTION phrase_states_follow_phrases(ids text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
DECLARE
    moved_at timestamptz;
BEGIN
    -- The learners' row locks, as their sessions take them, in one order.
    PERFORM 1 FROM learners l
     WHERE l.learner_id IN (SELECT s.learner_id
                              FROM phrase_states s JOIN phrases p ON p.id = s.phrase_id
                             WHERE s.phrase_id = ANY (ids) AND s.language_code <> p.language_code)
     ORDER BY l.learner_id
       FOR UPDATE OF l;
    moved_at := hold_exports_for_a_catalogue_stamp();
    WITH moving AS (
        SELECT s.learner_id, s.phrase_id, s.language_code AS old_language,
               p.language_code AS new_language
          FROM phrase_states s JOIN phrases p ON p.id = s.phrase_id
         WHERE s.phrase_id = ANY (ids) AND s.language_code <> p.language_code),
    moved AS (
        UPDATE phrase_states s
           SET language_code = m.new_language, updated_at = moved_at
          FROM moving m
         WHERE (s.learner_id, s.phrase_id) = (m.learner_id, m.phrase_id)
        RETURNING m.learner_id, m.old_language, m.new_language),
    started AS (
        SELECT learner_id, language_code, sum(change) AS change
          FROM (SELECT learner_id, old_language AS language_code, -1 AS change FROM moved
                UNION ALL
                SELECT learner_id, new_language, 1 FROM moved) changes
         GROUP BY learner_id, language_code)
    INSERT INTO learner_language_totals AS t
        (learner_id, language_code, sessions, total_duration_seconds, phrases_seen,
         phrases_correct, xp, first_studied_at, last_studied_at, updated_at, phrases_started)
    SELECT learner_id, language_code, 0, 0, 0, 0, 0, NULL, NULL, moved_at, change
      FROM started
    ON CONFLICT (learner_id, language_code) DO UPDATE SET
        phrases_started = t.phrases_started + EXCLUDED.phrases_started,
        updated_at = GREATEST(t.updated_at, EXCLUDED.updated_at);
END $$;
REVOKE EXECUTE ON FUNCTION phrase_states_follow_phrases(text[]) FROM PUBLIC;

-- How many of the phrases `ids` are phrases of `language`, each of them locked `FOR KEY SHARE`
-- (in `id` order) until the caller's transaction ends: a session's check of the phrases it
-- answers for the first time (see above). Only the service's role may call it.
CREATE FUNCTION lock_phrases_of_language(ids text[], language text) RETURNS bigint
    LANGUAGE sql SECURITY DEFINER SET search_path = lingo, pg_temp
BEGIN ATOMIC
    SELECT count(*) FROM (SELECT id FROM phrases WHERE id = ANY (ids) AND language_code = language
                           ORDER BY id FOR KEY SHARE) AS locked;
END;
REVOKE EXECUTE ON FUNCTION lock_phrases_of_language(text[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lock_phrases_of_language(text[], text) TO lingo_app;

-- Every update of `phrases` (a column list would rule out the transition tables); the phrases
-- whose language changed, if any, in one call.
CREATE FUNCTION phrase_states_after_phrase_language() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
DECLARE
    moved text[] := ARRAY(SELECT n.id FROM new_phrases n JOIN old_phrases o ON o.id = n.id
                           WHERE n.language_code <> o.language_code);
BEGIN
    IF cardinality(moved) > 0 THEN
        PERFORM phrase_states_follow_phrases(moved);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER phrase_states_language AFTER UPDATE ON phrases
    REFERENCING OLD TABLE AS old_phrases NEW TABLE AS new_phrases
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_states_after_phrase_language();

-- Last, the statements that lock readers out (ACCESS EXCLUSIVE on `phrases` and on
-- `learner_language_totals`, held until this migration commits, a moment later): a session or a
-- page waits for them only that moment, not for the index build above. The phrases moved before
-- this migration are brought in line by the next one, which scans `phrase_states` outside these
-- locks.

-- A learner may have a totals row in a language without a session in it (a moved phrase's
-- states): no study times then. `LEAST`/`GREATEST` of a session's upsert skip the null.
-- (A pod of the previous release reads these columns as non-null: a phrase moved during a
-- rollout answers its learners' progress with 500 from the old pods until they are gone.)
ALTER TABLE learner_language_totals
    ALTER COLUMN first_studied_at DROP NOT NULL,
    ALTER COLUMN last_studied_at DROP NOT NULL;

DROP INDEX phrases_language_code_id_idx;
ALTER INDEX phrases_language_code_id_unique_idx RENAME TO phrases_language_code_id_idx;
