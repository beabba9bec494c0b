-- For the previous releases only, like 20261128300002's trigger (drop both in the release after
-- this one; deploy/README.md, "Releases"). Pods of a release before 20261128100001 write a
-- session's answers through the `phrase_reviews` view one answer at a time: the first inserts the
-- session's row of the log and each later one appends to it (`phrase_reviews_append`, an UPDATE of
-- `phrase_ids`). 300002's trigger fires on the insert only, so a late session written that way
-- kept the checkpoints of every phrase but its first, and a later replay starting from one of
-- them missed that session's answer for good. The same function runs on the appends: it drops
-- the checkpoints cut after the session of every phrase the row holds, which is also right for
-- the phrases it already dropped them for.
CREATE TRIGGER phrase_checkpoints_late_appends AFTER UPDATE OF phrase_ids ON phrase_review_sessions
    FOR EACH ROW WHEN (NEW.studied_at < statement_timestamp())
    EXECUTE FUNCTION phrase_checkpoints_before_late_answers();
