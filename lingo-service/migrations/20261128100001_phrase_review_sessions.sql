-- The review log becomes one row per study session (issue 32, bench goal 2): a session's answers
-- as two arrays in answer order, instead of one row (and one primary-key entry of five columns)
-- per answer. Writing 100 answers cost 100 heap tuples and 100 index entries (about 1 ms of
-- PostgreSQL CPU); now one tuple and one index entry.
--
-- A phrase's history (for a late session) is read from the learner's rows since that phrase's
-- first answer (`phrase_states.first_reviewed_at`), by the primary key (learner_id, studied_at,
-- session_id): its answers in (studied_at, session_id, position) order, as before.
CREATE TABLE phrase_review_sessions (
    learner_id text NOT NULL,
    -- The session's `studied_at` and `id` (study_sessions); no foreign key, for the reasons of
    -- migration 20261127400001: the statement that inserts a session inserts this row with the
    -- id it has just returned, and the service's role may neither update nor delete either.
    studied_at timestamptz NOT NULL,
    session_id uuid NOT NULL,
    -- Answer i (0-based `position`) is phrase_ids[i + 1] with grades[i + 1]: FSRS ratings, 1 again,
    -- 2 hard, 3 good, 4 easy. No foreign key to `phrases` (the pipeline may remove a phrase; its
    -- answers stay on record).
    phrase_ids text[] NOT NULL,
    grades     smallint[] NOT NULL,
    PRIMARY KEY (learner_id, studied_at, session_id),
    CHECK (array_ndims(phrase_ids) = 1 AND array_lower(phrase_ids, 1) = 1
           AND cardinality(phrase_ids) BETWEEN 1 AND 1000
           AND array_position(phrase_ids, NULL) IS NULL),
    CHECK (array_ndims(grades) = 1 AND array_lower(grades, 1) = 1
           AND cardinality(grades) = cardinality(phrase_ids)
           AND array_position(grades, NULL) IS NULL
           AND 1 <= ALL (grades) AND 4 >= ALL (grades))
)
-- A session of 100 answers is a row of about 2.5 kB: above the default threshold (2 kB)
-- PostgreSQL would compress it on every insert and decompress it on every read. Rows stay as
-- they are up to a page; only sessions of several hundred answers are compressed.
WITH (toast_tuple_target = 8160);

-- The existing answers, moved: one row per (learner, studied_at, session), the answers in their
-- `position` order. Every answer of the old log is in exactly one array (checked below), and a
-- session's rows all share its learner and time (the service wrote them in one statement).
-- Duration: about 3.5 s per million answers (the bench cluster: 2.8 million answers of 37,700
-- sessions, the move, the check and the drop in 9.9 s, release PostgreSQL 15 on 2 cores at load
-- 3-6), in the migration's transaction. The previous release keeps working meanwhile and until
-- its pods are gone: `phrase_reviews` becomes a view of the new log (below).
INSERT INTO phrase_review_sessions (learner_id, studied_at, session_id, phrase_ids, grades)
SELECT learner_id, studied_at, session_id,
       array_agg(phrase_id ORDER BY position), array_agg(grade ORDER BY position)
FROM phrase_reviews
GROUP BY learner_id, studied_at, session_id;

DO $$
DECLARE
    old_answers bigint := (SELECT count(*) FROM phrase_reviews);
    new_answers bigint := (SELECT coalesce(sum(cardinality(phrase_ids)), 0) FROM phrase_review_sessions);
BEGIN
    IF old_answers <> new_answers THEN
        RAISE EXCEPTION 'review log move: % answers before, % after', old_answers, new_answers;
    END IF;
END $$;

DROP TABLE phrase_reviews;

GRANT SELECT, INSERT ON phrase_review_sessions TO lingo_app;

-- For the previous release only (deploy/README.md, "Releases": old pods serve until the rollout
-- ends, so a migration must keep them working): `phrase_reviews` as a view of the new log, one
-- row per answer as the old table had them, which its binary reads (a late session's history)
-- and inserts into (a session's answers, in `position` order, each appended to its session's
-- row). Slower than either log, and only for the minutes of a rollout. Drop it in the release
-- after this one.
CREATE VIEW phrase_reviews AS
SELECT s.learner_id, a.phrase_id, s.studied_at, s.session_id, (a.n - 1)::integer AS position,
       a.grade
FROM phrase_review_sessions s,
     unnest(s.phrase_ids, s.grades) WITH ORDINALITY AS a (phrase_id, grade, n);

-- SECURITY DEFINER (owned by lingo_owner): appending updates the session's row, which the runtime
-- role may not do itself.
CREATE FUNCTION phrase_reviews_append() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    IF NEW.grade IS NULL OR NEW.grade NOT BETWEEN 1 AND 4 THEN
        RAISE EXCEPTION 'grade % out of range', NEW.grade USING ERRCODE = 'check_violation';
    END IF;
    UPDATE phrase_review_sessions
    SET phrase_ids = phrase_ids || NEW.phrase_id, grades = grades || NEW.grade
    WHERE (learner_id, studied_at, session_id) = (NEW.learner_id, NEW.studied_at, NEW.session_id)
      AND cardinality(phrase_ids) = NEW.position;
    IF NOT FOUND THEN
        -- A session's first answer; any other position out of order fails here (the key exists,
        -- or the position is not 0) rather than landing in the wrong place.
        IF NEW.position <> 0 THEN
            RAISE EXCEPTION 'answer % of session % out of order', NEW.position, NEW.session_id
                USING ERRCODE = 'check_violation';
        END IF;
        INSERT INTO phrase_review_sessions (learner_id, studied_at, session_id, phrase_ids, grades)
        VALUES (NEW.learner_id, NEW.studied_at, NEW.session_id, ARRAY[NEW.phrase_id],
                ARRAY[NEW.grade]);
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER phrase_reviews_append INSTEAD OF INSERT ON phrase_reviews
    FOR EACH ROW EXECUTE FUNCTION phrase_reviews_append();

GRANT SELECT, INSERT ON phrase_reviews TO lingo_app;

-- The due-day counts' update trigger (migration 20261127300001) in one statement instead of
-- three: each (learner, language, day) gets the net change of the updated states (most of a
-- session's phrases move between a few days; days whose count does not change are not touched),
-- and a day whose count falls to 0 is removed in the same pass. 0.27 -> 0.17 ms for a session of
-- 100 answers (warm, one backend). PostgreSQL 15's MERGE may fail (unique violation) when two
-- transactions insert the same new day at once: the service writes one learner's states under
-- the learner's row lock, so two of its transactions never change the same learner's days.
CREATE OR REPLACE FUNCTION phrase_due_days_updated() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    MERGE INTO phrase_due_days d
    USING (SELECT learner_id, language_code, due_day, sum(change)::integer AS change
           FROM (SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date AS due_day,
                        -1 AS change
                 FROM old_states
                 UNION ALL
                 SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date, 1
                 FROM new_states) moves
           GROUP BY learner_id, language_code, due_day
           HAVING sum(change) <> 0) m
    ON (d.learner_id, d.language_code, d.due_day) = (m.learner_id, m.language_code, m.due_day)
    WHEN MATCHED AND d.phrases + m.change = 0 THEN DELETE
    WHEN MATCHED THEN UPDATE SET phrases = d.phrases + m.change
    WHEN NOT MATCHED THEN INSERT (learner_id, language_code, due_day, phrases)
        VALUES (m.learner_id, m.language_code, m.due_day, m.change);
    RETURN NULL;
END $$;
