-- How many translations a phrase has, stored on the phrase: every list of phrases (the catalogue,
-- its search, recommendations, GET /me/phrases and /me/reviews) reads the count with the phrase
-- row it reads anyway, instead of counting `phrase_translations` once per row (about a quarter of
-- a page's PostgreSQL CPU). See docs/lingo.md, "Translation counts".
--
-- No new write path: `refresh_phrase_search`, which every write of translations already runs
-- (statement triggers, once per phrase per statement) to recompute the phrase's search row,
-- now also sets the count. It locks the phrases' search rows first and counts in a later
-- statement (a new snapshot), so two transactions writing translations of one phrase take turns
-- and the second counts the first's rows: the count is exact, as the search row is.
ALTER TABLE phrases
    ADD COLUMN translation_count bigint NOT NULL DEFAULT 0 CHECK (translation_count >= 0);

-- The pipeline writes phrases but not their count: its writes of the other columns stay as
-- they were (a column list, or VALUES of the first five), a write of the count is refused.
REVOKE INSERT, UPDATE ON phrases FROM lingo_pipeline;
GRANT INSERT (id, text, language_code, created_at, updated_at),
      UPDATE (id, text, language_code, created_at, updated_at) ON phrases TO lingo_pipeline;

CREATE OR REPLACE FUNCTION refresh_phrase_search(ids text[]) RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = lingo, pg_temp
BEGIN ATOMIC
    SELECT 1 FROM phrase_search s JOIN unnest(ids) AS i(id) ON s.phrase_id = i.id
     ORDER BY s.phrase_id FOR UPDATE OF s;
    INSERT INTO phrase_search AS s (phrase_id, language_code, text_length, own, everything)
    SELECT p.id, p.language_code, char_length(p.text), search_document(p.text),
           search_document(p.text) || coalesce(
               (SELECT search_document(string_agg(t.text, ' '))
                  FROM phrase_translations t WHERE t.phrase_id = p.id),
               ''::tsvector)
      FROM (SELECT DISTINCT id FROM unnest(ids) AS i(id)) i
      JOIN phrases p ON p.id = i.id
    ON CONFLICT (phrase_id) DO UPDATE SET
        language_code = EXCLUDED.language_code,
        text_length = EXCLUDED.text_length,
        own = EXCLUDED.own,
        everything = EXCLUDED.everything;
    -- Only the counts that changed are written (a refresh for a new text changes none).
    UPDATE phrases p SET translation_count = c.n
      FROM (SELECT i.id, (SELECT count(*) FROM phrase_translations t WHERE t.phrase_id = i.id) AS n
              FROM (SELECT DISTINCT id FROM unnest(ids) AS i(id)) i) c
     WHERE p.id = c.id AND p.translation_count <> c.n;
END;

-- The refresh above now updates `phrases`; the search trigger on `phrases` fired on every
-- update, so each translation write refreshed its phrases twice. It now fires only for the
-- columns a search row copies, and only when they change. A column list rules out transition
-- tables, so it is a row trigger: a bulk edit of texts refreshes each edited phrase on its own
-- (the same work, in more statements); the pipeline's writes of translations are unchanged.
DROP TRIGGER phrase_search_update ON phrases;
CREATE FUNCTION phrase_search_after_phrase_text() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    PERFORM refresh_phrase_search(ARRAY[NEW.id]);
    RETURN NULL;
END
$$;
CREATE TRIGGER phrase_search_update AFTER UPDATE OF text, language_code ON phrases
    FOR EACH ROW
    WHEN (OLD.text IS DISTINCT FROM NEW.text OR OLD.language_code IS DISTINCT FROM NEW.language_code)
    EXECUTE FUNCTION phrase_search_after_phrase_text();

-- The phrases already in the catalogue. The `ALTER TABLE` above holds `phrases` exclusively
-- until this migration commits, so no write of translations (their foreign key locks the
-- phrase) can slip between this count and the triggers.
UPDATE phrases p SET translation_count = c.n
  FROM (SELECT phrase_id, count(*) AS n FROM phrase_translations GROUP BY phrase_id) c
 WHERE p.id = c.phrase_id;
