-- Full-text search over articles (docs/news.md, "GET /v1/news/search").
--
-- language      curated ISO 639-1 code the pipeline sets (default 'en'); it picks the text search
--               configuration an article is indexed and searched with.
-- search_vector title, summary and body weighted A/B/C, in the article's configuration. Each
--               configuration folds accents with the unaccent dictionary before stemming, so the
--               document, the query and ts_headline's fragments all see the same lexemes, and
--               highlights point at the words as written (no offsets shift: nothing is folded
--               outside the parser).
--
-- Why a trigger, not a generated column: adding a STORED generated column rewrites the whole table
-- under an ACCESS EXCLUSIVE lock, which would lock readers out for the whole rewrite of a million
-- articles. Here both columns are added as catalogue-only changes (a nullable column, a column
-- with a constant default), a BEFORE trigger keeps search_vector correct for every writer from
-- now on (pipeline, import, an operator's SQL: it recomputes the vector on every INSERT and
-- UPDATE, whatever the writer put there), the next migration fills existing rows in small
-- committed batches, and the one after builds the GIN index CONCURRENTLY. Readers are never
-- blocked by the backfill or the index build; this migration holds its ACCESS EXCLUSIVE lock only
-- for the catalogue changes, and gives up after lock_timeout rather than queue behind a long
-- reader while every later reader queues behind it.
--
-- Also kept by triggers, in the writing statement, so they are always current:
-- search_languages  the languages present: a search asks each one with its own configuration.
-- search_words      the folded words of titles, summaries and bodies, with a trigram index:
--                   `suggestion` respells a query that matches nothing from them. Words are only
--                   added (a word of a since-edited article may be suggested and then find
--                   nothing, which a suggestion may do).
--
-- unaccent and pg_trgm are created by deploy/postgres/bootstrap.sql (as superuser, in schema
-- public): check here so a database set up without them fails with a clear message.

SET LOCAL lock_timeout = '10s';

DO $$
BEGIN
    IF (SELECT count(*) FROM pg_extension WHERE extname IN ('unaccent', 'pg_trgm')) < 2 THEN
        RAISE EXCEPTION 'extensions unaccent and pg_trgm are missing: run deploy/postgres/bootstrap.sql as a superuser first';
    END IF;
END
$$;

-- One folding configuration per supported language (search_<code>), plus search_simple for any
-- other language: the language's own, with unaccent in front of its stemmer for the token types
-- that can hold non-ASCII letters.
DO $$
DECLARE
    language record;
BEGIN
    FOR language IN
        SELECT * FROM (VALUES
            ('ar', 'arabic'), ('ca', 'catalan'), ('da', 'danish'), ('de', 'german'),
            ('el', 'greek'), ('en', 'english'), ('es', 'spanish'), ('eu', 'basque'),
            ('fi', 'finnish'), ('fr', 'french'), ('ga', 'irish'), ('hu', 'hungarian'),
            ('hy', 'armenian'), ('id', 'indonesian'), ('it', 'italian'), ('lt', 'lithuanian'),
            ('ne', 'nepali'), ('nl', 'dutch'), ('no', 'norwegian'), ('pt', 'portuguese'),
            ('ro', 'romanian'), ('ru', 'russian'), ('sr', 'serbian'), ('sv', 'swedish'),
            ('ta', 'tamil'), ('tr', 'turkish'), ('yi', 'yiddish'), ('simple', 'simple')
        ) AS l (code, config)
    LOOP
        EXECUTE format('CREATE TEXT SEARCH CONFIGURATION news.%I (COPY = pg_catalog.%I)',
                       'search_' || language.code, language.config);
        EXECUTE format('ALTER TEXT SEARCH CONFIGURATION news.%I ALTER MAPPING FOR '
                       'word, hword, hword_part '
                       'WITH public.unaccent, pg_catalog.%I',
                       'search_' || language.code,
                       CASE language.config WHEN 'simple' THEN 'simple' ELSE language.config || '_stem' END);
    END LOOP;
END
$$;

-- The configuration of an article language (ISO 639-1); any other code is searched unstemmed.
CREATE FUNCTION search_config(language text) RETURNS regconfig
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = news, pg_catalog
AS $$
    SELECT coalesce(
        (SELECT c.oid::regconfig FROM pg_catalog.pg_ts_config c
          WHERE c.cfgnamespace = 'news'::regnamespace AND c.cfgname = 'search_' || language),
        'news.search_simple'::regconfig)
$$;

CREATE FUNCTION article_search_vector(language text, title text, summary text, body text)
RETURNS tsvector
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = news, pg_catalog
AS $$
    SELECT setweight(to_tsvector(search_config(language), title), 'A')
        || setweight(to_tsvector(search_config(language), summary), 'B')
        || setweight(to_tsvector(search_config(language), body), 'C')
$$;

ALTER TABLE articles
    ADD COLUMN language text NOT NULL DEFAULT 'en',
    ADD COLUMN search_vector tsvector;
-- Checked for new rows now; existing rows (all 'en') are validated by the backfill migration
-- without blocking anyone.
ALTER TABLE articles
    ADD CONSTRAINT articles_language_check CHECK (language ~ '^[a-z]{2}$') NOT VALID;

CREATE FUNCTION articles_search_vector() RETURNS trigger
LANGUAGE plpgsql
SET search_path = news, pg_catalog
AS $$
BEGIN
    NEW.search_vector := article_search_vector(NEW.language, NEW.title, NEW.summary, NEW.body);
    RETURN NEW;
END
$$;

CREATE TRIGGER articles_search_vector
    BEFORE INSERT OR UPDATE ON articles
    FOR EACH ROW EXECUTE FUNCTION articles_search_vector();

CREATE TABLE search_languages (
    language text PRIMARY KEY
);

CREATE TABLE search_words (
    word text PRIMARY KEY
);
CREATE INDEX search_words_trgm_idx ON search_words USING gin (word public.gin_trgm_ops);

-- Adds the languages and words of the rows a statement wrote (one grouped insert per statement,
-- so a bulk import pays once per batch). SECURITY DEFINER: writers need no rights on these tables.
CREATE FUNCTION articles_search_lists() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = news, pg_catalog
AS $$
BEGIN
    INSERT INTO search_languages (language)
    SELECT DISTINCT language FROM written
    ON CONFLICT DO NOTHING;
    INSERT INTO search_words (word)
    SELECT DISTINCT w.word
      FROM written a,
           unnest(tsvector_to_array(
               to_tsvector('news.search_simple', a.title || ' ' || a.summary || ' ' || a.body))) AS w (word)
     WHERE length(w.word) BETWEEN 3 AND 40 AND w.word !~ '[0-9_]'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER articles_search_lists_insert
    AFTER INSERT ON articles REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION articles_search_lists();
CREATE TRIGGER articles_search_lists_update
    AFTER UPDATE ON articles REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION articles_search_lists();

GRANT SELECT ON search_languages, search_words TO news_app;
