-- Phrase search reads its matches in rank order, one tier at a time, and stops when the page is
-- full (store/phrases.rs, `search`; docs/lingo.md, "Phrase search"). Within a tier the order is
-- (text_length, phrase_id): these btrees hold it, with and without the `language` filter, so a
-- tier whose matches are frequent is walked in order and only until the page is full; a tier
-- whose matches are rare is read from a GIN index (`own` for the tiers of the phrase's own text,
-- `everything` for those found through a translation) and only those few are sorted. The
-- planner chooses per statement, with the search's words in hand (the store plans each search
-- anew: `force_custom_plan`). `own` is carried in the btrees so that walking the tiers of the
-- phrase's own text reads the index only.
CREATE INDEX phrase_search_own_idx ON phrase_search USING gin (own);
CREATE INDEX phrase_search_rank_idx ON phrase_search (text_length, phrase_id) INCLUDE (own);
CREATE INDEX phrase_search_language_rank_idx
    ON phrase_search (language_code, text_length, phrase_id) INCLUDE (own);
