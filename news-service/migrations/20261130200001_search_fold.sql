-- Search reads every article's text, and `q`, through `search_fold` first (docs/news.md, "GET
-- /v1/news/search"): lower case in every script, and words split at any punctuation or white
-- space, not only ASCII's.
--
-- Why: PostgreSQL's text search parser and dictionaries read text by the database's
-- `LC_CTYPE`, which is `C` here (deploy/local/run.sh, the cluster manifests):
-- - the dictionaries lower-case ASCII letters only. Latin letters with accents became ASCII
--   through `unaccent` first, so "CAFÉ" found `cafe`; but a Cyrillic word, or the Greek words
--   of an English article, kept their capitals: `москва` did not find "Москва" or "МОСКВА" in a
--   Russian article. (The Greek stemmer lower-cases by itself.)
-- - the parser takes every character beyond ASCII for a letter, so punctuation and white space
--   beyond ASCII joined the words around them: in “the harbour is full” the words were `"the`
--   and `full"` (after unaccent), in "said—quietly—that" one word `said-quietly-that`, in
--   "l’eau" one word `l'eau`, in «Paris» `<<paris>>`, "va ?" `va ?`; `full`,
--   `quietly`, `eau` or `paris` found nothing.
--
-- What `search_fold` does, one code point for one (so the words `ts_headline` marks in the
-- folded text are the words at the same places in the text as written, and the Rust model of
-- the configurations reads the folded text with the same spans):
-- - every character beyond ASCII that Unicode calls punctuation (general category P*) or white
--   space becomes an ASCII space (the regular expression's classes follow ICU in an ICU
--   collation). ASCII punctuation stays, for the parser to read as before (`12.5`, `co-op`);
-- - lower case by Unicode rules (the ICU root collation, as lingo's phrase search), with `İ`
--   written `I` first (its lower case is two code points; `unaccent` makes it `I` anyway) and
--   Greek's final sigma `ς` written `σ` (a word typed `οδοσ` is "ΟΔΟΣ" and "οδός").
-- An article whose texts hold neither a letter beyond ASCII that lower-casing changes nor such a
-- punctuation mark keeps its vector (lower-casing ASCII changes nothing: the dictionaries do it
-- anyway); the next migration computes the others again.
--
-- Catalogue-only: holds its locks only for the function changes, and gives up after
-- lock_timeout rather than queue behind a long reader.

SET LOCAL lock_timeout = '10s';

CREATE FUNCTION search_fold(input text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN pg_catalog.translate(
        pg_catalog.lower(
            pg_catalog.regexp_replace(
                pg_catalog.translate(input, 'İ', 'I') COLLATE pg_catalog."und-x-icu",
                '(?=[^[:ascii:]])[[:punct:][:space:]]', ' ', 'g')),
        'ς', 'σ');

CREATE OR REPLACE FUNCTION article_search_vector(language text, title text, summary text, body text)
RETURNS tsvector
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = news, pg_catalog
AS $$
    SELECT setweight(to_tsvector(search_config(language), search_fold(title)), 'A')
        || setweight(to_tsvector(search_config(language), search_fold(summary)), 'B')
        || setweight(to_tsvector(search_config(language), search_fold(body)), 'C')
$$;

-- As in migration search_vector_inline, each text lowered first.
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
    NEW.search_vector := setweight(to_tsvector(config, search_fold(NEW.title)), 'A')
        || setweight(to_tsvector(config, search_fold(NEW.summary)), 'B')
        || setweight(to_tsvector(config, search_fold(NEW.body)), 'C');
    RETURN NEW;
END
$$;

-- The word list `suggestion` respells from (migrations search_vector_trigger and
-- search_vector_inline) holds the words of the folded texts too, so that it holds `full` and
-- `москва` rather than `full"` and `Москва`; the service folds the words of `q` the same way
-- before it compares them. Words already listed stay (the list only grows).
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
               unnest(tsvector_to_array(to_tsvector('news.search_simple',
                   search_fold(a.title || ' ' || a.summary || ' ' || a.body)))) AS w (word)
    )
    INSERT INTO search_words (word)
    SELECT word FROM words
     WHERE length(word) BETWEEN 3 AND 40 AND word !~ '[0-9_]'
     ORDER BY word COLLATE "C"
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION articles_search_lists_changed() RETURNS trigger
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
               unnest(tsvector_to_array(to_tsvector('news.search_simple',
                   search_fold(a.title || ' ' || a.summary || ' ' || a.body)))) AS w (word)
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
