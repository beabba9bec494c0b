-- How many of a learner's phrases fall due on each UTC day, per language. `due_total` of
-- GET /me/reviews and `phrases_due` of GET /me/progress add up the days before today here and
-- count only the phrases due today in `phrase_states`, so they cost about the same for a learner
-- with 10 phrases due or 20,000 (counting every due state took 3 ms for 12,000 of them).
-- Kept by statement triggers on `phrase_states`, so every writer (the service, a bulk load, a
-- removal) keeps it exact; a day whose count falls to 0 is removed.
CREATE TABLE phrase_due_days (
    learner_id    text NOT NULL,
    language_code text NOT NULL,
    due_day       date NOT NULL,
    phrases       integer NOT NULL CHECK (phrases >= 0),
    PRIMARY KEY (learner_id, language_code, due_day)
);

-- SECURITY DEFINER (owned by lingo_owner), like the search triggers: the runtime role reads this
-- table and cannot write it, so only these triggers move its counts.
CREATE FUNCTION phrase_due_days_inserted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    INSERT INTO phrase_due_days AS d (learner_id, language_code, due_day, phrases)
    SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date, count(*)
    FROM new_states GROUP BY 1, 2, 3
    ON CONFLICT (learner_id, language_code, due_day) DO UPDATE SET phrases = d.phrases + EXCLUDED.phrases;
    RETURN NULL;
END $$;

-- An update moves a phrase from its old day to its new one (most updates of a session do): the
-- old days are decremented first (they exist: the CHECK, tested on the row proposed before any
-- conflict, would refuse a negative insert), then the new ones incremented, then emptied days go.
CREATE FUNCTION phrase_due_days_updated() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    UPDATE phrase_due_days d SET phrases = d.phrases - o.phrases
    FROM (SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date AS due_day,
                 count(*) AS phrases
          FROM old_states GROUP BY 1, 2, 3) o
    WHERE (d.learner_id, d.language_code, d.due_day) = (o.learner_id, o.language_code, o.due_day);
    INSERT INTO phrase_due_days AS d (learner_id, language_code, due_day, phrases)
    SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date, count(*)
    FROM new_states GROUP BY 1, 2, 3
    ON CONFLICT (learner_id, language_code, due_day) DO UPDATE SET phrases = d.phrases + EXCLUDED.phrases;
    DELETE FROM phrase_due_days d USING (SELECT DISTINCT learner_id, language_code, due_at FROM old_states) o
    WHERE (d.learner_id, d.language_code, d.due_day)
        = (o.learner_id, o.language_code, (o.due_at AT TIME ZONE 'UTC')::date)
      AND d.phrases = 0;
    RETURN NULL;
END $$;

CREATE FUNCTION phrase_due_days_deleted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    UPDATE phrase_due_days d SET phrases = d.phrases - o.phrases
    FROM (SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date AS due_day,
                 count(*) AS phrases
          FROM old_states GROUP BY 1, 2, 3) o
    WHERE (d.learner_id, d.language_code, d.due_day) = (o.learner_id, o.language_code, o.due_day);
    DELETE FROM phrase_due_days d USING (SELECT DISTINCT learner_id, language_code, due_at FROM old_states) o
    WHERE (d.learner_id, d.language_code, d.due_day)
        = (o.learner_id, o.language_code, (o.due_at AT TIME ZONE 'UTC')::date)
      AND d.phrases = 0;
    RETURN NULL;
END $$;

CREATE TRIGGER phrase_due_days_insert AFTER INSERT ON phrase_states
    REFERENCING NEW TABLE AS new_states
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_due_days_inserted();
CREATE TRIGGER phrase_due_days_update AFTER UPDATE ON phrase_states
    REFERENCING OLD TABLE AS old_states NEW TABLE AS new_states
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_due_days_updated();
CREATE TRIGGER phrase_due_days_delete AFTER DELETE ON phrase_states
    REFERENCING OLD TABLE AS old_states
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_due_days_deleted();

CREATE FUNCTION phrase_due_days_truncated() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    TRUNCATE phrase_due_days;
    RETURN NULL;
END $$;
CREATE TRIGGER phrase_due_days_truncate AFTER TRUNCATE ON phrase_states
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_due_days_truncated();

INSERT INTO phrase_due_days (learner_id, language_code, due_day, phrases)
SELECT learner_id, language_code, (due_at AT TIME ZONE 'UTC')::date, count(*)
FROM phrase_states GROUP BY 1, 2, 3;

GRANT SELECT ON phrase_due_days TO lingo_app;
