-- A phrase the catalogue pipeline deletes (`DELETE FROM phrases WHERE id = ...`) takes its
-- learners' states with it (docs/lingo.md, "When the catalogue deletes a phrase"). The catalogue's
-- own rows of it go by their foreign keys (`phrase_translations`, `phrase_search`, the stats and
-- recommendations: ON DELETE CASCADE), but `phrase_states` has no foreign key to `phrases` (a
-- cascade would not adjust `phrases_started` nor take the learners' locks, and its check would
-- cost every first answer a lookup), so the states stayed: the pages left them out, but
-- the due-day counts (`due_total`, `phrases_due`) and `phrases_started` still counted them, for
-- ever (a phrase nobody can answer again stays due), the analytics export of states still
-- listed them, and their checkpoints stayed.
--
-- A trigger on `phrases`, in the pipeline's own statement and transaction, as for a move of a
-- phrase to another language (migration 20261129600001, whose comment explains the locking):
-- - the states of the deleted phrases are deleted. The existing delete triggers on
--   `phrase_states` take their due-day counts (migration 20261127300001) and their checkpoints
--   (migration 20261128300001) with them;
-- - `phrases_started` of each learner's totals row of the state's language is decremented, and
--   its `updated_at` becomes the time of the delete, so the progress export shows the row again
--   (with its new `phrases_started` and `phrases_due`). Like the move's, this stamp is taken
--   after the move's advisory lock (same class, same key: the second of the stamp), which holds
--   the exports' horizon (store/progress.rs, `export_horizon`) back until the pipeline's
--   transaction ends. A delete of phrases no learner answered stamps nothing and takes no lock;
-- - the review log (`phrase_review_sessions`) keeps the answers: it is the history of what was
--   studied, and the sessions' XP and counts stay. A late session replays only the phrases it
--   answers, and it cannot answer a deleted phrase (422 `unknown_phrase`), so nothing replays
--   one. The states export lists what is stored, so a deleted phrase's states just leave it.
--
-- Concurrency with a learner's session answering a deleted phrase:
-- - a session answering the phrase for the first time holds it `FOR KEY SHARE` (migration
--   20261129600001, `lock_phrases_of_language`) until it commits; the `DELETE` waits for that,
--   then this trigger finds the state the session wrote. A session that locks the phrase after
--   the `DELETE` waits for it, then does not find the phrase (422 `unknown_phrase`);
-- - a session answering a phrase the learner has a state of does not lock the phrase, but writes
--   under the learner's row lock: this trigger takes the row locks of the learners it deletes
--   states of, in learner order, before it reads their states in a later statement (a new
--   snapshot), so it waits for their sessions in flight and deletes what they wrote; a later
--   session of theirs waits for the delete to commit and then does not find the phrase (422).
-- - A delete of several phrases in one transaction may deadlock with a session, as a move of
--   several may (see migration 20261129600001): PostgreSQL then aborts one of them.
--
-- Cost: like the move, a scan of `phrase_states` to find the states (no index on `phrase_id`,
-- which every session's write would pay for), one per statement however many phrases it
-- deletes, and another to delete them when there are some. Measured (PostgreSQL 15, 2 shared
-- cores): deleting a phrase with 10,000 states (of 10,000 learners, among 210,000 states) took
-- 0.18-0.27 s in the pipeline's statement (five runs); one no learner answered, 0.02 s (the
-- scan alone).
--
-- SECURITY DEFINER (owned by lingo_owner), like the move's trigger: the pipeline role gets no
-- right on the learners' tables.

-- The states of the phrases `ids` (deleted) removed, with the totals' counts of phrases started.
CREATE FUNCTION phrase_states_of_deleted_phrases(ids text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
DECLARE
    deleted_at timestamptz;
BEGIN
    -- The learners' row locks, as their sessions take them, in one order.
    PERFORM 1 FROM learners l
     WHERE l.learner_id IN (SELECT s.learner_id FROM phrase_states s WHERE s.phrase_id = ANY (ids))
     ORDER BY l.learner_id
       FOR UPDATE OF l;
    IF NOT FOUND THEN
        -- No learner has a state of them, and none can get one: a first answer waited for the
        -- delete's row locks on the phrases, and finds them gone.
        RETURN;
    END IF;
    -- The exports' hold, as the move takes it (migration 20261129600001).
    deleted_at := hold_exports_for_a_catalogue_stamp();
    WITH deleted AS (
        DELETE FROM phrase_states s WHERE s.phrase_id = ANY (ids)
        RETURNING s.learner_id, s.language_code),
    started AS (
        SELECT learner_id, language_code, count(*) AS phrases
          FROM deleted GROUP BY learner_id, language_code)
    UPDATE learner_language_totals t
       SET phrases_started = t.phrases_started - d.phrases,
           updated_at = GREATEST(t.updated_at, deleted_at)
      FROM started d
     WHERE (t.learner_id, t.language_code) = (d.learner_id, d.language_code);
END $$;
REVOKE EXECUTE ON FUNCTION phrase_states_of_deleted_phrases(text[]) FROM PUBLIC;

CREATE FUNCTION phrase_states_after_phrase_delete() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    PERFORM phrase_states_of_deleted_phrases(ARRAY(SELECT id FROM deleted_phrases));
    RETURN NULL;
END $$;

CREATE TRIGGER phrase_states_delete AFTER DELETE ON phrases
    REFERENCING OLD TABLE AS deleted_phrases
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_states_after_phrase_delete();

-- The phrases deleted before this migration.
SELECT phrase_states_of_deleted_phrases(ARRAY(
    SELECT DISTINCT s.phrase_id FROM phrase_states s
     WHERE NOT EXISTS (SELECT 1 FROM phrases p WHERE p.id = s.phrase_id)));
