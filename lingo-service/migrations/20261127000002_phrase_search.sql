-- Phrase search (`GET /phrases?q=`): a folded search document per phrase, over its
-- own text and over its text with every translation, kept fresh by triggers on the pipeline's
-- writes, and a GIN index over it. See docs/lingo.md, "Phrase search".
--
-- `unaccent` and `pg_trgm` are contrib extensions (shipped with PostgreSQL and its images).
-- Creating one needs rights on the database that the schema owner does not have, so
-- deploy/postgres/bootstrap.sql installs them (as the superuser, into schema public, which every
-- role may use and nobody may create in). Fail with a clear message when it has not.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'unaccent') THEN
        RAISE EXCEPTION 'extension unaccent is missing: run deploy/postgres/bootstrap.sql as a superuser first';
    END IF;
END
$$;

-- Folding: accents off (unaccent's rules: "é" -> "e", "ß" -> "ss"), then lower case by Unicode
-- rules (the ICU root collation; the database's own collation may be C, which lowercases ASCII
-- only). IMMUTABLE so that documents can be stored and indexed: it is, as long as nobody edits
-- unaccent's rules file. SQL-standard bodies bind their references when created, so the
-- functions do not depend on the caller's search_path.
CREATE FUNCTION search_fold(input text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN lower(public.unaccent('public.unaccent'::regdictionary, input) COLLATE pg_catalog."und-x-icu");

-- A folded text as a set of words: PostgreSQL's text search parser with the `simple`
-- configuration (no stemming, no stop words), positions stripped (only membership matters).
CREATE FUNCTION search_document(input text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN strip(to_tsvector('pg_catalog.simple'::regconfig, search_fold(input)));

-- What a search string asks for: every word, whole, and the last word also as a prefix
-- (type-ahead) when `last_as_prefix`. Words are found by the same parser and folding as the
-- documents; of a hyphenated word ("co-op") only its parts count, so that "co-op" finds
-- "co-operation". NULL when the string has no word (only punctuation): it matches nothing.
CREATE FUNCTION search_query(input text, last_as_prefix boolean) RETURNS tsquery
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
BEGIN ATOMIC
    SELECT string_agg(
               '''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || ''''
                   || CASE WHEN last_as_prefix AND w.last THEN ':*' ELSE '' END,
               ' & ' ORDER BY w.lexeme)::tsquery
      FROM (SELECT u.lexeme, max(t.pos) = max(max(t.pos)) OVER () AS last
              FROM unnest(to_tsvector('pg_catalog.simple'::regconfig, search_fold(input)))
                     AS u(lexeme, positions, weights),
                   unnest(u.positions) AS t(pos)
             WHERE strpos(u.lexeme, '-') = 0
             GROUP BY u.lexeme) w;
END;

-- One row per phrase. `own` is the phrase's text, `everything` its text and all its
-- translations; `language_code` and `text_length` are copied so that ranking a search's matches
-- needs no other table (the page's rows are joined to `phrases` afterwards).
CREATE TABLE phrase_search (
    phrase_id     text PRIMARY KEY REFERENCES phrases (id) ON DELETE CASCADE,
    language_code text NOT NULL,
    text_length   integer NOT NULL,
    own           tsvector NOT NULL,
    everything    tsvector NOT NULL
);
CREATE INDEX phrase_search_everything_idx ON phrase_search USING gin (everything);

-- Recomputes the rows of these phrases from the catalogue. The rows are locked first, and the
-- documents computed by a later statement (a new snapshot under READ COMMITTED), so two
-- transactions writing translations of one phrase cannot leave a document that misses one.
-- The ids are joined (unnest), not tested with `= ANY`, so a bulk import of N phrases costs
-- O(N), not O(N^2).
CREATE FUNCTION refresh_phrase_search(ids text[]) RETURNS void
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
END;
REVOKE ALL ON FUNCTION refresh_phrase_search(text[]) FROM PUBLIC;

-- Statement-level triggers with transition tables: a bulk import refreshes each phrase once per
-- statement, not once per translation row. SECURITY DEFINER (owned by lingo_owner): the
-- pipeline needs no rights on phrase_search. A deleted phrase loses its row by the cascade.
CREATE FUNCTION phrase_search_after_phrases() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    PERFORM refresh_phrase_search(ARRAY(SELECT id FROM changed));
    RETURN NULL;
END
$$;

CREATE FUNCTION phrase_search_after_translations() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    PERFORM refresh_phrase_search(ARRAY(SELECT DISTINCT phrase_id FROM changed));
    RETURN NULL;
END
$$;

CREATE FUNCTION phrase_search_after_moved_translations() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    PERFORM refresh_phrase_search(ARRAY(
        SELECT phrase_id FROM changed UNION SELECT phrase_id FROM previous));
    RETURN NULL;
END
$$;

CREATE FUNCTION phrase_search_after_truncated_translations() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = lingo, pg_temp AS $$
BEGIN
    PERFORM refresh_phrase_search(ARRAY(SELECT id FROM phrases));
    RETURN NULL;
END
$$;

CREATE TRIGGER phrase_search_insert AFTER INSERT ON phrases
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_search_after_phrases();
CREATE TRIGGER phrase_search_update AFTER UPDATE ON phrases
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_search_after_phrases();
CREATE TRIGGER phrase_search_insert AFTER INSERT ON phrase_translations
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_search_after_translations();
CREATE TRIGGER phrase_search_delete AFTER DELETE ON phrase_translations
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_search_after_translations();
CREATE TRIGGER phrase_search_update AFTER UPDATE ON phrase_translations
    REFERENCING OLD TABLE AS previous NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_search_after_moved_translations();
CREATE TRIGGER phrase_search_truncate AFTER TRUNCATE ON phrase_translations
    FOR EACH STATEMENT EXECUTE FUNCTION phrase_search_after_truncated_translations();

-- The phrases already in the catalogue.
SELECT refresh_phrase_search(ARRAY(SELECT id FROM phrases));

GRANT SELECT ON phrase_search TO lingo_app, lingo_pipeline;
