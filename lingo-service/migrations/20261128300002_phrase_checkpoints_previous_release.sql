-- For the previous release only (deploy/README.md, "Releases": old pods serve until the rollout
-- ends). A checkpoint holds a phrase's state after exactly its answers before its cut
-- (migration 20261128300001). This release drops the checkpoints a late session makes wrong (cut
-- after its `studied_at`) in the session's transaction; the previous release knows nothing of
-- checkpoints, so a late session it serves would leave them in place, and a later replay that
-- starts from one would miss that session's answers for good.
--
-- So the log drops them itself when a session row arrives with a `studied_at` before the start
-- of its statement (given by the client: a session without one is timed during the statement
-- and cannot precede a checkpoint). For this release's own late sessions the service then finds
-- nothing left to drop. Cost: one index probe per answer of a session sent with a past
-- `studied_at`; nothing for the others. Drop this trigger in the release after this one.
CREATE FUNCTION phrase_checkpoints_before_late_answers() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    DELETE FROM phrase_checkpoints
    WHERE learner_id = NEW.learner_id AND phrase_id = ANY (NEW.phrase_ids)
      AND cut > NEW.studied_at;
    RETURN NULL;
END $$;

CREATE TRIGGER phrase_checkpoints_late_answers AFTER INSERT ON phrase_review_sessions
    FOR EACH ROW WHEN (NEW.studied_at < statement_timestamp())
    EXECUTE FUNCTION phrase_checkpoints_before_late_answers();
