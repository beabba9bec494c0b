-- Phrase search in one call (store/phrases.rs, `search`): a plpgsql function that folds the
-- search string into its two tsqueries once, then reads the four tiers one after the other, each
-- with its own statement, and stops as soon as the page is full. Before, the one search
-- statement called `search_query` 8 times, and PostgreSQL planned that SQL function's body again
-- for each call and all four tiers, even those it would not run, at every search (about 2 ms of
-- planning for 0.7 ms of execution, deploy/bench/RESULTS.md).

-- `search_query` with the same result, in plpgsql: the plan of its statement is kept for the
-- session, where the SQL function's body was planned again at each call.
CREATE OR REPLACE FUNCTION search_query(input text, last_as_prefix boolean) RETURNS tsquery
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = lingo, pg_temp AS $$
BEGIN
    RETURN (
        SELECT string_agg(
                   '''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || ''''
                       || CASE WHEN last_as_prefix AND w.last THEN ':*' ELSE '' END,
                   ' & ' ORDER BY w.lexeme)::tsquery
          FROM (SELECT u.lexeme, max(t.pos) = max(max(t.pos)) OVER () AS last
                  FROM unnest(to_tsvector('pg_catalog.simple'::regconfig, search_fold(input)))
                         AS u(lexeme, positions, weights),
                       unnest(u.positions) AS t(pos)
                 WHERE strpos(u.lexeme, '-') = 0
                 GROUP BY u.lexeme) w);
END
$$;

-- The first `wanted` matches of the search `input` after the rank (`after_tier`,
-- `after_length`, `after_id`), best first, only those in `language` when it is not null. Tier
-- 0: every word whole in the phrase's own text; 1: the same with the last word as a prefix (and
-- not 0); 2: every word whole in the text and its translations together (and not 0 or 1); 3: the
-- same with the last word as a prefix (and not 0, 1 or 2). Within a tier the order is
-- (text_length, phrase_id), held by the rank indexes.
--
-- Each tier's statement is planned when it runs, with this search's values (EXECUTE ... USING
-- plans with the values bound, and keeps no plan): a frequent word walks a rank index until the
-- page is full, a rare one is read from a GIN index and its few matches sorted, the planner's
-- choice with the words in hand (a generic plan, made for no word in particular, could walk a
-- whole index for a rare word). The tier is a constant then too, so each tier is planned as if
-- its condition were written alone. A tier after the page is full is neither planned nor run.
-- STABLE: every statement reads the caller's snapshot, so a phrase the pipeline moves between
-- tiers meanwhile is not on the page twice.
CREATE FUNCTION phrase_search_ranks(
    input text, language text, after_tier integer, after_length integer, after_id text,
    wanted bigint)
    RETURNS TABLE (phrase_id text, tier integer, text_length integer)
    LANGUAGE plpgsql STABLE ROWS 21 SET search_path = lingo, pg_temp AS $function$
DECLARE
    whole constant tsquery := search_query(input, false);
    prefix constant tsquery := search_query(input, true);
    found bigint;
BEGIN
    -- No word (only punctuation): nothing matches.
    IF whole IS NULL THEN
        RETURN;
    END IF;
    -- A cursor before the first tier starts at the first tier's start.
    IF after_tier < 0 THEN
        after_length := -1;
        after_id := '';
    END IF;
    FOR current_tier IN greatest(after_tier, 0)..3 LOOP
        EXIT WHEN wanted <= 0;
        RETURN QUERY EXECUTE $tier$
            SELECT ps.phrase_id, $1, ps.text_length FROM phrase_search ps
             WHERE CASE $1
                     WHEN 0 THEN ps.own @@ $2
                     WHEN 1 THEN ps.own @@ $3 AND NOT ps.own @@ $2
                     WHEN 2 THEN ps.everything @@ $2 AND NOT ps.own @@ $3
                     ELSE ps.everything @@ $3 AND NOT ps.everything @@ $2 AND NOT ps.own @@ $3
                   END
               AND ($4::text IS NULL OR ps.language_code = $4)
               AND (ps.text_length, ps.phrase_id) > ($5, $6)
             ORDER BY ps.text_length, ps.phrase_id
             LIMIT $7
            $tier$
            USING current_tier, whole, prefix, language, after_length, after_id, wanted;
        GET DIAGNOSTICS found = ROW_COUNT;
        wanted := wanted - found;
        -- Later tiers from their start: lengths are never negative, every id is longer than "".
        after_length := -1;
        after_id := '';
    END LOOP;
END
$function$;
