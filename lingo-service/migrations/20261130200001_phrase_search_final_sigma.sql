-- Phrase search: Greek's final sigma `ς` is the letter `σ`. Lower-casing by Unicode rules writes
-- a capital `Σ` at the end of a word as `ς` and inside one as `σ`, and a learner types `ς` at
-- the end of a word or not (`οδοσ`, a prefix `οδος` of `οδοστρωμα`): "ΟΔΟΣ", "οδός" and `οδοσ`
-- folded to two different words, so `q=οδοσ` found neither phrase, and `q=οδος` (a last word
-- typed with its final letter) did not find "ΟΔΟΣΤΡΩΜΑ" by prefix. The folding now writes every
-- `ς` as `σ`, after lower-casing, for documents and search strings alike (both fold through
-- `search_fold`), in the text and in translations.
--
-- `search_document` (a SQL-standard body, bound to this function when it was created) and
-- `search_query` (plpgsql) call it, so replacing its body changes both. The stored documents
-- that change are computed again below, in the migration's transaction: those of the phrases
-- whose text or a translation holds `ς` or `Σ` (the only letters whose folding now differs:
-- `unaccent` writes neither), as migration 20261130100001 does for its characters (the
-- pipeline's writes of those phrases wait for it; reads and searches do not).
CREATE OR REPLACE FUNCTION search_fold(input text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN translate(
        lower(public.unaccent('public.unaccent'::regdictionary, input) COLLATE pg_catalog."und-x-icu"),
        E'./@:<>\u0085\u00A0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u202F\u205F\u3000ς',
        '                         σ');

SELECT refresh_phrase_search(ARRAY(
    SELECT id FROM phrases WHERE text ~ '[ςΣ]'
    UNION
    SELECT phrase_id FROM phrase_translations WHERE text ~ '[ςΣ]'));
