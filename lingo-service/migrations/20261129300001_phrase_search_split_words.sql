-- Phrase search: words joined by `.`, `/`, `@` or `:` are words of their own. PostgreSQL's text
-- search parser keeps a decimal ("8.30"), a path ("ja/nein"), a host ("www.bahn.de"), an e-mail
-- address ("info@beispiel.de") or a URL as one token, so "30", "nein", "bahn" or "beispiel"
-- found nothing, though docs/lingo.md says words are split at punctuation. The folding now turns
-- those four characters into spaces before the parser sees the text, for documents and search
-- strings alike (both fold through `search_fold`), so "8.30" still finds "8.30".
--
-- `search_document` (a SQL-standard body, bound to this function when it was created) and
-- `search_query` (plpgsql) call it, so replacing its body changes both. Every stored document
-- is computed again below, in one pass over the catalogue in the migration's transaction (the
-- pipeline's writes of translations wait for it; reads and searches do not).
CREATE OR REPLACE FUNCTION search_fold(input text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN translate(
        lower(public.unaccent('public.unaccent'::regdictionary, input) COLLATE pg_catalog."und-x-icu"),
        './@:', '    ');

SELECT refresh_phrase_search(ARRAY(SELECT id FROM phrases));
