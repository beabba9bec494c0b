-- search_vector is kept in the article's heap row (storage MAIN) instead of out of line in TOAST.
--
-- Why: a relevance search checks the match and the score tiers on every row of its ranked window
-- (for a word in 31% of a million articles, 3,300 rows walked on the published_at index to find
-- the newest 1,000 matches), and a search page reads each hit's per-field match flags. With the
-- default storage (EXTENDED) every row over about 2 kB had its vector moved out of line (40% of
-- the bench's million articles: the vector is barely compressible, so it is the largest value
-- left after the body is compressed), and each `@@` on such a row read it back from TOAST
-- through the TOAST index: 13,000 buffer hits and 14 ms of CPU for the window of `officials`,
-- against 3 ms with the vectors in the rows. With MAIN the row keeps the vector uncompressed and
-- in line (up to about 8 kB; PostgreSQL moves the body out of line first, which only a page's
-- highlights read), and moves it out only when the row cannot fit otherwise.
--
-- SET STORAGE changes the catalogue only: it applies to rows written from now on. The next
-- migration rewrites the existing rows whose vector may be out of line, in small committed
-- batches. Holds its ACCESS EXCLUSIVE lock only for the catalogue changes, and gives up after
-- lock_timeout rather than queue behind a long reader while every later reader queues behind it.
--
-- The triggers skip work an update does not need, which that rewrite (and re-imports) rely on:
-- - The vector is recomputed unless the update leaves the language, the three texts and the
--   vector itself as they were (then it is the value the trigger computed before). A writer that
--   sets search_vector to anything else, NULL included, still gets it recomputed.
-- - The word list is fed only from rows whose texts an update changed (or whose id it changed).
--   A statement trigger with an old table cannot name columns (`UPDATE OF`), so the update
--   trigger is replaced by one that sees the rows before and after.

SET LOCAL lock_timeout = '10s';

ALTER TABLE articles ALTER COLUMN search_vector SET STORAGE MAIN;

CREATE OR REPLACE FUNCTION articles_search_vector() RETURNS trigger
LANGUAGE plpgsql
SET search_path = news, pg_catalog
AS $$
DECLARE
    config regconfig;
BEGIN
    IF TG_OP = 'UPDATE'
       AND NEW.language = OLD.language AND NEW.title = OLD.title
       AND NEW.summary = OLD.summary AND NEW.body = OLD.body
       AND NEW.search_vector = OLD.search_vector THEN
        RETURN NEW;
    END IF;
    config := search_config(NEW.language);
    NEW.search_vector := setweight(to_tsvector(config, NEW.title), 'A')
        || setweight(to_tsvector(config, NEW.summary), 'B')
        || setweight(to_tsvector(config, NEW.body), 'C');
    RETURN NEW;
END
$$;

-- As articles_search_lists (migration search_vector_trigger), for the rows of an update whose
-- texts changed.
CREATE FUNCTION articles_search_lists_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = news, pg_catalog
AS $$
BEGIN
    INSERT INTO search_languages (language)
    SELECT DISTINCT language FROM written
    ORDER BY language
    ON CONFLICT DO NOTHING;
    WITH words AS MATERIALIZED (
        SELECT DISTINCT w.word
          FROM written a,
               unnest(tsvector_to_array(
                   to_tsvector('news.search_simple', a.title || ' ' || a.summary || ' ' || a.body))) AS w (word)
         WHERE NOT EXISTS (SELECT 1 FROM previous b
                            WHERE b.id = a.id AND b.title = a.title
                              AND b.summary = a.summary AND b.body = a.body)
    )
    INSERT INTO search_words (word)
    SELECT word FROM words
     WHERE length(word) BETWEEN 3 AND 40 AND word !~ '[0-9_]'
     ORDER BY word COLLATE "C"
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

DROP TRIGGER articles_search_lists_update ON articles;
CREATE TRIGGER articles_search_lists_update
    AFTER UPDATE ON articles REFERENCING OLD TABLE AS previous NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION articles_search_lists_changed();
