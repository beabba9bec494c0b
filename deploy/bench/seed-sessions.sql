-- Bulk study sessions for the benchmark: :learners learners (bench-learner-000001, ...) with
-- :per sessions each over the last 90 days, and the totals the service keeps beside them
-- (learners, learner_language_totals) derived from those rows, so the data is consistent as if
-- every session had been posted. Run as lingo_owner (the runtime role cannot bulk-load and the
-- pipeline role may not write study sessions). Plain bulk INSERTs; ids are random UUIDs.
\set ON_ERROR_STOP on
BEGIN;
CREATE TEMP TABLE bench_sessions ON COMMIT DROP AS
SELECT gen_random_uuid() AS id,
       format('bench-learner-%s', lpad(l::text, 6, '0')) AS learner_id,
       (ARRAY['es', 'fr', 'de', 'it', 'pt', 'en'])[1 + (l + s) % 6] AS language_code,
       60 + (l * 7 + s * 13) % 840 AS duration_seconds,
       seen, correct,
       CASE WHEN seen = 0 THEN 0
            ELSE 10 + correct + CASE WHEN seen >= 5 AND correct = seen THEN 5 ELSE 0 END END
         AS xp_awarded,
       now() - make_interval(secs => ((l * 7919 + s * 104729) % (90 * 86400))) AS created_at
FROM generate_series(1, :learners) AS l,
     generate_series(1, :per) AS s,
     LATERAL (SELECT (l + s * 3) % 21 AS seen) AS a,
     LATERAL (SELECT seen - (l + s) % (seen / 3 + 1) AS correct) AS b;

INSERT INTO study_sessions (id, learner_id, language_code, duration_seconds, phrases_seen,
                            phrases_correct, xp_awarded, created_at, studied_at)
SELECT id, learner_id, language_code, duration_seconds, seen, correct, xp_awarded, created_at,
       created_at
FROM bench_sessions;

INSERT INTO learners (learner_id, total_xp, sessions, updated_at)
SELECT learner_id, sum(xp_awarded), count(*), max(created_at)
FROM bench_sessions GROUP BY learner_id;

INSERT INTO learner_language_totals (learner_id, language_code, sessions, total_duration_seconds,
                                     phrases_seen, phrases_correct, xp, first_studied_at,
                                     last_studied_at, updated_at)
SELECT learner_id, language_code, count(*), sum(duration_seconds), sum(seen), sum(correct),
       sum(xp_awarded), min(created_at), max(created_at), max(created_at)
FROM bench_sessions GROUP BY learner_id, language_code;
COMMIT;
ANALYZE study_sessions;
ANALYZE learners;
ANALYZE learner_language_totals;
