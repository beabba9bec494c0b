-- The search_vector trigger computes the vector itself, looking the language's configuration up
-- once per row. Through article_search_vector (a SQL function, so each call starts an executor,
-- and it asked search_config three times, each a catalogue query of its own) a row cost about
-- four times the parsing of its text: seeding 20,000 articles took 0.48 ms per article in the
-- function against 0.12 ms in to_tsvector itself (issue 33: a million articles are seeded and
-- imported through this trigger). The vector is the same as article_search_vector's, which
-- stays the reference definition (news-service/tests/api/schema.rs compares the two).
CREATE OR REPLACE FUNCTION articles_search_vector() RETURNS trigger
LANGUAGE plpgsql
SET search_path = news, pg_catalog
AS $$
DECLARE
    config regconfig := search_config(NEW.language);
BEGIN
    NEW.search_vector := setweight(to_tsvector(config, NEW.title), 'A')
        || setweight(to_tsvector(config, NEW.summary), 'B')
        || setweight(to_tsvector(config, NEW.body), 'C');
    RETURN NEW;
END
$$;

-- The search lists' rows are added in sorted order, so that two writers adding some of the same
-- new words at once (the seed writes two batches at a time; an import may run beside the
-- pipeline) take the words' locks in the same order: one waits for the other instead of the two
-- deadlocking. The words are made distinct first (hashed, in the CTE) and only those few
-- thousand sorted and filtered, rather than sorting every word of every article of the batch
-- (0.19 ms per seeded article against 0.27 ms). Otherwise as in migration `search`.
CREATE OR REPLACE FUNCTION articles_search_lists() RETURNS trigger
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
    )
    INSERT INTO search_words (word)
    SELECT word FROM words
     WHERE length(word) BETWEEN 3 AND 40 AND word !~ '[0-9_]'
     ORDER BY word COLLATE "C"
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
