-- Search is case-insensitive in every script, not only where `unaccent` writes a letter as ASCII
-- (docs/news.md, "GET /v1/news/search").
--
-- Why: the text search dictionaries lower-case a word by the database's `LC_CTYPE`, which is
-- `C` here (deploy/local/run.sh, the cluster manifests): ASCII letters only. Latin letters with
-- accents became ASCII through `unaccent` first, so "CAFÉ" found `cafe`; but a Cyrillic,
-- Greek-in-English or Armenian word kept its capitals: `москва` did not find "Москва" or
-- "МОСКВА" in a Russian article, and `выборы` found "выборы" but not "ВЫБОРЫ". (The Greek
-- stemmer lower-cases by itself, so Greek articles were already right; the Greek words of an
-- English article were not.)
--
-- What: `search_lower` lower-cases a text by Unicode rules (the ICU root collation, as lingo's
-- phrase search does) and writes Greek's final sigma `ς` as `σ` (a word typed `οδοσ` is the
-- word "ΟΔΟΣ" or "οδός"). The vector, the search's query and `ts_headline` read each text
-- through it. It keeps every character where it was, one code point for one, so the words
-- `ts_headline` marks in the lowered text are the words at the same places in the text as
-- written: `İ` (whose lower case is `i` and a combining dot, two code points) is written `I`
-- first (`unaccent` makes it `I` anyway), and no other letter's lower case has another length.
-- Lower-casing ASCII letters before the dictionaries changes nothing (they lower-case them
-- anyway), so an article whose texts hold no other letter a lower-casing changes keeps its
-- vector; the next migration computes the others again.
--
-- Catalogue-only: holds its locks only for the function changes, and gives up after
-- lock_timeout rather than queue behind a long reader.

SET LOCAL lock_timeout = '10s';

CREATE FUNCTION search_lower(input text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN pg_catalog.translate(
        pg_catalog.lower(pg_catalog.translate(input, 'İ', 'I') COLLATE pg_catalog."und-x-icu"),
        'ς', 'σ');

CREATE OR REPLACE FUNCTION article_search_vector(language text, title text, summary text, body text)
RETURNS tsvector
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = news, pg_catalog
AS $$
    SELECT setweight(to_tsvector(search_config(language), search_lower(title)), 'A')
        || setweight(to_tsvector(search_config(language), search_lower(summary)), 'B')
        || setweight(to_tsvector(search_config(language), search_lower(body)), 'C')
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
    NEW.search_vector := setweight(to_tsvector(config, search_lower(NEW.title)), 'A')
        || setweight(to_tsvector(config, search_lower(NEW.summary)), 'B')
        || setweight(to_tsvector(config, search_lower(NEW.body)), 'C');
    RETURN NEW;
END
$$;
