-- Phrase search: every white space splits words, and «quoted» words are words. The folding let
-- two kinds of text through that PostgreSQL's text search parser (in this database's C ctype)
-- does not read as docs/lingo.md says words are read:
--
-- - white space other than ASCII's (U+00A0 no-break space, U+202F narrow no-break space, U+3000
--   ideographic space, U+2000..U+200A, ...) counts as a letter, so it joined the words around it:
--   French text puts a no-break space before `?`, `!`, `:` and `;` ("Comment ça va\u00A0?" held
--   the word "va\u00A0", so `ca va comment` found nothing), and a `q` typed with such a space
--   (`buenos\u3000dias`) was one word that no phrase holds;
-- - unaccent writes the guillemets « » ‹ › as `<<` `>>` `<` `>`, and the parser takes `<hola>`
--   for a markup tag and drops it, so "Él dijo «hola»" did not hold the word "hola".
--
-- The folding now turns every character Rust's `char::is_whitespace` (Unicode White_Space)
-- takes for white space beyond ASCII's, and `<` and `>`, into spaces, for documents and search
-- strings alike (both fold through `search_fold`). The characters are spelled as escapes, one
-- space for each in the replacement.
--
-- `search_document` (a SQL-standard body, bound to this function when it was created) and
-- `search_query` (plpgsql) call it, so replacing its body changes both. The stored documents
-- that change are computed again below, in the migration's transaction: those of the phrases
-- whose text or a translation holds, once unaccented, one of the characters the folding now
-- turns into spaces (the pipeline's writes of those phrases wait for it; reads and searches do
-- not). Looking for them costs one pass of `unaccent` over the catalogue: 0.6 s for 100,000
-- phrases with 500,000 translations, where computing every document again took 14 s.
CREATE OR REPLACE FUNCTION search_fold(input text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN translate(
        lower(public.unaccent('public.unaccent'::regdictionary, input) COLLATE pg_catalog."und-x-icu"),
        E'./@:<>\u0085\u00A0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u202F\u205F\u3000',
        '                         ');

SELECT refresh_phrase_search(ARRAY(
    SELECT id FROM phrases
     WHERE public.unaccent('public.unaccent'::regdictionary, text)
           ~ E'[<>\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]'
    UNION
    SELECT phrase_id FROM phrase_translations
     WHERE public.unaccent('public.unaccent'::regdictionary, text)
           ~ E'[<>\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]'));
