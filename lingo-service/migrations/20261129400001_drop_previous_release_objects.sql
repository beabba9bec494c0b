-- Drops what earlier migrations kept for the pods of the release before theirs only (deploy/README.md,
-- "Releases": old pods serve until a rollout ends, so a migration keeps them working, and a later
-- release removes what it kept). Those rollouts are long over: neither this release nor the one it
-- replaces (whose pods serve while this migration runs) uses any object below; both read and write
-- the review log as `phrase_review_sessions` rows and keep the checkpoints themselves.
--
-- - `phrase_checkpoints_late_answers` and `phrase_checkpoints_late_appends` (migrations
--   20261128300002 and 20261128300003), triggers on the review log, and their function
--   `phrase_checkpoints_before_late_answers`: they dropped the checkpoints cut after a session that
--   arrived with a past `studied_at`, for the pods that knew nothing of checkpoints. The service drops
--   them itself in a late session's transaction (store/phrase_progress/late.rs), so for its own
--   sessions the triggers found nothing left; they cost an index probe per answer of every session
--   sent with a past `studied_at`, and now nothing.
-- - `phrase_reviews` (migration 20261128100001), the old one-row-per-answer log as a view of
--   `phrase_review_sessions`, with its INSTEAD OF trigger `phrase_reviews_append` and that trigger's
--   function: the pods from before the one-row-per-session log read and wrote answers through it.
--
-- DROP TRIGGER locks `phrase_review_sessions` exclusively until this migration commits (a moment:
-- nothing is rewritten). Give up after lock_timeout rather than queue behind a long transaction
-- while every session's write queues behind this one; running the migration again retries.
SET LOCAL lock_timeout = '10s';

DROP TRIGGER phrase_checkpoints_late_answers ON phrase_review_sessions;
DROP TRIGGER phrase_checkpoints_late_appends ON phrase_review_sessions;
DROP FUNCTION phrase_checkpoints_before_late_answers();

-- The view's INSTEAD OF trigger goes with the view.
DROP VIEW phrase_reviews;
DROP FUNCTION phrase_reviews_append();
